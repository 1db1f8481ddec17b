"""The display vocabulary covers every stored value of its dimension exactly once."""

import pytest

from ingest.schema import VOCABULARIES
from service.vocabulary import DATA_TYPE_ORDER, DIMENSIONS


@pytest.mark.parametrize("endpoint", list(DIMENSIONS))
def test_each_stored_value_has_exactly_one_display_term(endpoint: str) -> None:
    column, terms = DIMENSIONS[endpoint]
    stored = [value for term in terms for value in term.stored]
    assert sorted(stored) == sorted(VOCABULARIES[column])
    assert all(term.display_name and term.description for term in terms)


def test_spec_identifiers_and_data_types() -> None:
    identifiers = {name: [t.identifier for t in terms] for name, (_, terms) in DIMENSIONS.items()}
    assert identifiers == {
        "fee_types": ["equity", "option"],
        "fee_categories": [
            "Fee And Rebates",
            "Legal Regulatory Fees",
            "Market Data Fees",
            "Participant Fee",
            "Port Fees And Other Services",
            "General Provisions",
        ],
        "actions": ["Make", "Take", "Open", "Routed & Other"],
        "participants": [
            "All",
            "Market Maker",
            "Away Market Maker",
            "Broker Dealer",
            "Customer",
            "Firm",
            "Professional & Other",
        ],
    }
    assert DATA_TYPE_ORDER == (
        "fees_and_rebates",
        "legal_regulatory_fees",
        "market_data_fees",
        "participant_fees",
        "port_fees",
        "general_provisions",
    )
