"""An answer on its way out (`service.edge.reply`): its head leaves with the first part of its body,
so a process stopped between the two has sent nothing a balancer could not try elsewhere."""

import asyncio

from starlette.types import Message

from service.edge.call import arrival
from service.edge.reply import Reply

SCOPE = {"type": "http", "method": "GET", "path": "/healthz", "headers": [], "query_string": b""}


def test_the_head_waits_for_the_first_part_of_the_body_and_leaves_with_it() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def answer() -> list[str]:
        """What had been sent, and whether the head counted as sent, after each message."""
        reply = Reply(send, arrival(SCOPE), SCOPE, max_age=b"60")
        seen = []
        for message in (
            {"type": "http.response.start", "status": 200, "headers": []},
            {"type": "http.response.body", "body": b"{}", "more_body": False},
        ):
            await reply.send(message)
            seen.append(f"{len(sent)} sent, started {reply.started}")
        return seen

    assert asyncio.run(answer()) == ["0 sent, started False", "2 sent, started True"]
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    assert (b"x-content-type-options", b"nosniff") in sent[0]["headers"]
