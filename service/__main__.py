"""`python -m service ARGS` is `fees ARGS` (`service.cli`): `python -m service serve`,
`python -m service keys add|list|revoke`, and the other commands."""

import sys

from service.cli import main

if __name__ == "__main__":
    sys.exit(main())
