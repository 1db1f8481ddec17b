"""The supplier family's display vocabulary, mapped from the dataset's fine-grained values.

This is the one place that knows that `routed` and `other` are shown together as
`Routed & Other`, that `legal_regulatory_fee` is `Legal Regulatory Fees`, and so on. The order
of each tuple is the order items are listed in responses (and documented in the README).
"""

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Term:
    identifier: str  # what the supplier family calls it
    stored: tuple[str, ...]  # the dataset values it covers
    display_name: str
    description: str
    extra: str = ""  # liquidity_type, typical_fee_structure or data_type, per dimension


FEE_TYPES: Final = (
    Term("equity", ("equity",), "Equity", "Fees for trading cash equities (stocks and ETPs)."),
    Term("option", ("option",), "Options", "Fees for trading listed options contracts."),
)

FEE_CATEGORIES: Final = (
    Term(
        "Fee And Rebates",
        ("fees_and_rebates",),
        "Fees and Rebates",
        "Standard transaction fees and liquidity rebates.",
        "fees_and_rebates",
    ),
    Term(
        "Legal Regulatory Fees",
        ("legal_regulatory_fee",),
        "Legal & Regulatory Fees",
        "SEC Section 31 fees, FINRA TAF, CAT and other regulatory charges.",
        "legal_regulatory_fees",
    ),
    Term(
        "Market Data Fees",
        ("market_data_fees",),
        "Market Data Fees",
        "Real-time and delayed market data subscriptions and distribution.",
        "market_data_fees",
    ),
    Term(
        "Participant Fee",
        ("participant_fee",),
        "Participant Fees",
        "Membership, permit and participation fees.",
        "participant_fees",
    ),
    Term(
        "Port Fees And Other Services",
        ("port_fees_and_other_services",),
        "Port Fees and Other Services",
        "Connectivity, ports, co-location and other services.",
        "port_fees",
    ),
    Term(
        "General Provisions",
        ("general_provisions",),
        "General Provisions",
        "General rules and definitions that apply across the fee schedule.",
        "general_provisions",
    ),
)

ACTIONS: Final = (
    Term("Make", ("make",), "Make", "Orders that add liquidity to the book.", "adding"),
    Term("Take", ("take",), "Take", "Orders that remove liquidity from the book.", "removing"),
    Term("Open", ("open",), "Open", "Opening-auction transactions.", "neutral"),
    Term(
        "Routed & Other",
        ("routed", "other"),
        "Routed & Other",
        "Orders routed to other venues and miscellaneous actions.",
        "neutral",
    ),
)

PARTICIPANTS: Final = (
    Term(
        "All",
        ("all",),
        "All Participants",
        "Fees that apply to every participant type.",
        "Aggregated",
    ),
    Term(
        "Market Maker",
        ("market_maker",),
        "Market Maker",
        "Market makers registered on the venue, with quoting obligations.",
        "Enhanced rebates",
    ),
    Term(
        "Away Market Maker",
        ("away_market_maker",),
        "Away Market Maker",
        "Market makers registered on another venue.",
        "Standard rebates",
    ),
    Term(
        "Broker Dealer",
        ("broker_dealer",),
        "Broker Dealer",
        "Registered broker-dealers trading for their own or customer accounts.",
        "Standard fees",
    ),
    Term(
        "Customer",
        ("customer",),
        "Customer",
        "Public (retail and institutional) customers.",
        "Reduced fees",
    ),
    Term(
        "Firm", ("firm",), "Firm", "Clearing firms trading proprietary accounts.", "Standard fees"
    ),
    Term(
        "Professional & Other",
        ("professional", "other"),
        "Professional & Other",
        "Professional customers and any other participant type.",
        "Variable",
    ),
)

# The discovery endpoints: which dataset column each one groups, and its terms.
DIMENSIONS: Final[dict[str, tuple[str, tuple[Term, ...]]]] = {
    "fee_types": ("fee_type", FEE_TYPES),
    "fee_categories": ("fee_category", FEE_CATEGORIES),
    "actions": ("action", ACTIONS),
    "participants": ("participant", PARTICIPANTS),
}

DATA_TYPE_ORDER: Final = tuple(term.extra for term in FEE_CATEGORIES)
DATA_TYPE_OF_CATEGORY: Final = {term.stored[0]: term.extra for term in FEE_CATEGORIES}

# Stored value -> the supplier family's identifier, per dataset column.
IDENTIFIER_OF: Final = {
    column: {stored: term.identifier for term in terms for stored in term.stored}
    for column, terms in DIMENSIONS.values()
}
