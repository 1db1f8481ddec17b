-- One output file: the rows numbered in synth_ids.
-- $codes/$fee_types/$names are parallel lists of the (venue, asset class) pairs allowed by the
-- registry; $seed is already reduced modulo 2**32.
-- Percent thresholds in the CASEs are cumulative, which is what makes the draws skewed.
COPY (
WITH keyed AS (
    -- Rows come in blocks of 8; each block is cut into fee lines by one of the patterns of
    -- $segments (the place in the block where each row's line begins), so a line holds 1 to 8
    -- consecutive rows: its records, oldest first. What a line is (venue, category, label,
    -- tier, ...) is drawn from the line's key, what a record says (its amount's form and
    -- figure, its dates, its notes) from the row's.
    SELECT
        i,
        block * 8 + first AS line,
        i - (block * 8 + first) AS step,
        -- the record is its line's last: the block ends, or the next row begins another line
        place = 7 OR $segments[pattern + 1][place + 2] <> first AS last_of_line,
        (i * 2654435761 + $seed * 40503) % 4294967296 AS k,
        ((block * 8 + first) * 2654435761 + $seed * 40503 + 1) % 4294967296 AS lk,
        ((i + 1) * 2654435761 + $seed * 40503) % 4294967296 AS next_k
    FROM (
        SELECT *, $segments[pattern + 1][place + 1] AS first
        FROM (
            SELECT
                i,
                i // 8 AS block,
                i % 8 AS place,
                synth_h(((i // 8) * 2654435761 + $seed * 40503 + 2) % 4294967296, 9)
                    % len($segments) AS pattern
            FROM synth_ids
        )
    )
),
drawn AS (
    -- Hashes per line (l1-l5) and per row (h1-h3); each yields several draws from disjoint
    -- decimal digit ranges, which is independent enough for benchmark data and a third of the
    -- cost of one hash per column.
    SELECT
        i,
        line,
        step,
        last_of_line,
        l1 % 1000000 AS u_venue,
        l2 % 100 AS u_category,
        (l2 // 100) % 100 AS u_action,
        (l2 // 10000) % 100 AS u_participant,
        (l2 // 1000000) % 100 AS u_label,
        l3 % 100 AS u_symbol_class,
        (l3 // 100) % 100 AS u_symbol_type,
        (l3 // 10000) % 100 AS u_trade_type,
        (l3 // 1000000) % 100 AS u_basis,
        l4 % 100 AS u_tier,
        (l4 // 100) % 100 AS u_conditions,
        (l4 // 10000) % 2 = 0 AS u_rebate,
        -- the line's first figure; each later record moves it by 0 to 2 steps of its scale
        (l4 // 100000) % 1000000 + CASE WHEN step > 0 THEN h2 % 3 ELSE 0 END AS u_figure,
        -- floor(sqrt(uniform on [0, 84^2))) has a density rising linearly with the month, so
        -- recent schedules hold more lines than old ones, as in a growing archive. sqrt is
        -- correctly rounded, so this is exact and platform-independent for integers < 7056.
        floor(sqrt(l5 % 7056))::BIGINT AS first_boundary,
        (l5 // 7056) % 100 AS u_open_ended,
        (l5 // 705600) % 24 AS extra_months,
        h1 % 100 AS u_form,
        (h1 // 100) % 100 AS u_notes,
        (h1 // 10000) % 100 AS u_gap,
        synth_h(k, 6) % 3 AS jitter,
        synth_h(next_k, 6) % 3 AS next_jitter,
        l6 % 100 AS u_action_details,
        (l6 // 100) % 100 AS u_participant_details,
        (l6 // 10000) % 100 AS u_volume_criteria,
        (l6 // 1000000) % 100 AS u_symbols,
        (l6 // 100000000) % 40 AS u_excluded,
        l7 % 100 AS u_exclusions,
        (l7 // 100) % 100 AS u_extra_info,
        (l7 // 10000) % 100 AS u_fee_code
    FROM (
        SELECT
            *,
            synth_h(lk, 1) AS l1,
            synth_h(lk, 2) AS l2,
            synth_h(lk, 3) AS l3,
            synth_h(lk, 4) AS l4,
            synth_h(lk, 5) AS l5,
            synth_h(lk, 7) AS l6,
            synth_h(lk, 8) AS l7,
            synth_h(k, 4) AS h1,
            synth_h(k, 5) AS h2
        FROM keyed
    )
),
paired AS (
    SELECT
        *,
        -- Half the rows pick a pair uniformly, half by a squared uniform draw on [0, 1),
        -- which front-loads the list: the first pairs (by code) get several times the rows of
        -- the last, a mild skew like busy venues' longer schedules. v^2 * pairs < 10^12 * pairs
        -- stays far inside BIGINT.
        CASE
            WHEN u_venue < 500000 THEN 1 + 2 * u_venue * len($codes) // 1000000
            ELSE 1 + (2 * u_venue - 1000000) * (2 * u_venue - 1000000) * len($codes)
                // 1000000000000
        END AS pair
    FROM drawn
),
venue AS (
    SELECT
        *,
        $codes[pair] AS exchange,
        $fee_types[pair] AS fee_type,
        $names[pair] AS display_name,
        CASE
            WHEN u_category < 55 THEN 'fees_and_rebates'
            WHEN u_category < 67 THEN 'port_fees_and_other_services'
            WHEN u_category < 77 THEN 'market_data_fees'
            WHEN u_category < 87 THEN 'participant_fee'
            WHEN u_category < 95 THEN 'legal_regulatory_fee'
            ELSE 'general_provisions'
        END AS fee_category
    FROM paired
),
classified AS (
    SELECT
        *,
        CASE
            WHEN fee_category <> 'fees_and_rebates' THEN
                CASE WHEN u_action < 92 THEN 'other' ELSE 'take' END
            WHEN u_action < 40 THEN 'make'
            WHEN u_action < 78 THEN 'take'
            WHEN u_action < 90 THEN 'routed'
            WHEN u_action < 97 THEN 'open'
            ELSE 'other'
        END AS action,
        CASE
            WHEN u_participant < 30 THEN 'all'
            WHEN u_participant < 50 THEN 'customer'
            WHEN u_participant < 65 THEN 'market_maker'
            WHEN u_participant < 75 THEN 'broker_dealer'
            WHEN u_participant < 83 THEN 'firm'
            WHEN u_participant < 90 THEN 'professional'
            WHEN u_participant < 95 THEN 'away_market_maker'
            ELSE 'other'
        END AS participant,
        CASE
            WHEN u_symbol_class < 35 THEN NULL
            WHEN u_symbol_class < 60 THEN 'all'
            WHEN u_symbol_class < 72 THEN 'equity_class'
            WHEN u_symbol_class < 82 THEN 'etf'
            WHEN u_symbol_class < 86 THEN 'etn'
            WHEN u_symbol_class < 92 AND fee_type = 'option' THEN 'index'
            ELSE 'not_applicable'
        END AS symbol_classification,
        -- Penny/non-penny and simple/complex are option concepts: equity rows leave them
        -- empty except for an occasional explicit not_applicable.
        CASE
            WHEN fee_type = 'equity' THEN
                CASE WHEN u_symbol_type < 10 THEN 'not_applicable' END
            WHEN u_symbol_type < 15 THEN NULL
            WHEN u_symbol_type < 50 THEN 'penny'
            WHEN u_symbol_type < 80 THEN 'non_penny'
            WHEN u_symbol_type < 95 THEN 'both'
            ELSE 'not_applicable'
        END AS symbol_type,
        CASE
            WHEN fee_type = 'equity' THEN
                CASE WHEN u_trade_type < 10 THEN 'not_applicable' END
            WHEN u_trade_type < 10 THEN NULL
            WHEN u_trade_type < 45 THEN 'simple_order'
            WHEN u_trade_type < 70 THEN 'complex_order'
            WHEN u_trade_type < 85 THEN 'multiply_traded_options'
            WHEN u_trade_type < 95 THEN 'index_options'
            ELSE 'not_applicable'
        END AS trade_type,
        -- Whole dollars for flat fees, cents for per-contract fees, ten-thousandths of a
        -- dollar (mils) for per-share fees: the three magnitudes real schedules print.
        CASE
            WHEN fee_category = 'fees_and_rebates' AND fee_type = 'equity' THEN
                '$0.' || lpad((1 + u_figure % 35)::VARCHAR, 4, '0')
            WHEN fee_category = 'fees_and_rebates' THEN synth_money(1 + u_figure % 130)
            WHEN fee_category = 'legal_regulatory_fee' THEN synth_money(100 + u_figure % 4900)
            WHEN fee_category = 'port_fees_and_other_services' THEN
                synth_money(100 * (50 + 50 * (u_figure % 100)))
            WHEN fee_category = 'market_data_fees' THEN
                synth_money(100 * (5 + 25 * (u_figure % 1000)))
            WHEN fee_category = 'participant_fee' THEN
                synth_money(100 * (500 + 250 * (u_figure % 200)))
            ELSE synth_money(100 * (100 + 100 * (u_figure % 100)))
        END AS plain_amount,
        -- Adding liquidity earns a rebate on about half of the make lines.
        action = 'make' AND u_rebate AS is_rebate
    FROM venue
),
dated AS (
    -- A change every 2 to 4 months: a record starts 3 boundaries after the one before, give or
    -- take its jitter, and ends the day before the next one starts, or a month earlier (a
    -- gap, 10 %). A line's last record is still in force (70 %) or ends 1 to 24 months on.
    -- Boundaries run to 2027-12, past today: the announced future changes.
    SELECT
        *,
        synth_boundary(first_boundary + 3 * step + jitter) AS start_date,
        CASE
            WHEN NOT last_of_line THEN
                synth_boundary(
                    first_boundary + 3 * (step + 1) + next_jitter
                        - CASE WHEN u_gap < 10 AND 2 + next_jitter > jitter THEN 1 ELSE 0 END
                ) - 1
            WHEN u_open_ended >= 70 THEN
                synth_boundary(
                    least(first_boundary + 3 * step + jitter + 1 + extra_months, 108)
                ) - 1
        END AS end_date
    FROM classified
)
SELECT
    exchange,
    fee_type,
    fee_category,
    action,
    participant,
    symbol_classification,
    symbol_type,
    trade_type,
    CASE fee_category
        WHEN 'fees_and_rebates' THEN
            CASE action
                WHEN 'make' THEN ['Add Liquidity', 'Add Liquidity, Displayed',
                                  'Add Liquidity, Non-Displayed', 'Posting Credit'][1 + u_label % 4]
                WHEN 'take' THEN ['Remove Liquidity', 'Remove Liquidity, Tape C',
                                  'Take Fee'][1 + u_label % 3]
                WHEN 'routed' THEN ['Routed to Away Market', 'Routed, Destination Specific'
                                    ][1 + u_label % 2]
                WHEN 'open' THEN ['Opening Auction', 'Opening Cross'][1 + u_label % 2]
                ELSE ['Closing Auction', 'Midpoint Execution'][1 + u_label % 2]
            END
        WHEN 'port_fees_and_other_services' THEN
            ['Logical Port', 'FIX Port, Order Entry', 'Drop Copy Port', 'Cross-Connect, 10Gb'
             ][1 + u_label % 4]
        WHEN 'market_data_fees' THEN
            ['Depth of Book Feed', 'Top of Book, Internal Distribution',
             'Non-Display Usage'][1 + u_label % 3]
        WHEN 'participant_fee' THEN
            ['Membership Fee', 'Trading Permit', 'Application Fee, One-Time'][1 + u_label % 3]
        WHEN 'legal_regulatory_fee' THEN
            ['Section 31 Fee', 'Options Regulatory Fee', 'CAT Fee'][1 + u_label % 3]
        ELSE ['Billing Dispute Filing', 'Late Payment Charge'][1 + u_label % 2]
    END || ' #' || line AS fee_name,
    -- u_form < 5: the ~5 % of lines that are not a plain money figure.
    CASE
        WHEN u_form < 2 THEN '0.' || lpad((5 + u_figure % 91)::VARCHAR, 2, '0') || '% of TDV'
        WHEN u_form < 4 THEN 'Free'
        WHEN u_form < 5 THEN
            '$0.' || lpad((5 + u_figure % 46)::VARCHAR, 2, '0') || ' - $0.'
                || lpad((55 + u_figure % 45)::VARCHAR, 2, '0')
        WHEN is_rebate THEN '(' || plain_amount || ')'
        ELSE plain_amount
    END AS fee_amount,
    CASE
        WHEN u_basis < 8 THEN NULL
        WHEN fee_category = 'fees_and_rebates' AND fee_type = 'equity' THEN
            CASE WHEN u_basis < 90 THEN 'per share' ELSE 'per share executed' END
        WHEN fee_category = 'fees_and_rebates' THEN
            CASE WHEN u_basis < 85 THEN 'per contract' ELSE 'per contract, per side' END
        WHEN fee_category = 'port_fees_and_other_services' THEN
            CASE WHEN u_basis < 60 THEN 'per port' WHEN u_basis < 80 THEN 'per port, per month'
                 ELSE 'per month' END
        WHEN fee_category = 'market_data_fees' THEN
            CASE WHEN u_basis < 60 THEN 'per month' ELSE 'per user per month' END
        WHEN fee_category = 'participant_fee' THEN
            CASE WHEN u_basis < 70 THEN 'per month' ELSE 'per year' END
        WHEN fee_category = 'legal_regulatory_fee' THEN
            CASE WHEN fee_type = 'option' THEN 'per contract' ELSE 'per $1M of sales' END
        ELSE 'per occurrence'
    END AS fee_basis,
    CASE
        WHEN u_tier < 55 OR fee_category <> 'fees_and_rebates' THEN NULL
        WHEN u_tier < 70 THEN 'Tier ' || (1 + u_tier % 4)
        WHEN u_tier < 80 THEN 'Base'
        WHEN fee_type = 'equity' THEN
            'ADV >= ' || format('{:,}', 500000 * (1 + u_tier % 8)) || ' shares'
        ELSE 'ADV >= ' || format('{:,}', 25000 * (1 + u_tier % 8)) || ' contracts'
    END AS volume_tier,
    CASE
        WHEN u_conditions < 65 THEN NULL
        WHEN u_conditions < 75 THEN 'Applies to displayed orders'
        WHEN u_conditions < 83 THEN 'Securities priced at or above $1.00'
        WHEN u_conditions < 90 THEN 'Non-displayed, midpoint peg orders'
        WHEN u_conditions < 95 THEN 'Member must be registered as a "Market Maker"'
        ELSE 'Excludes Retail Orders, MOC and LOC'
    END AS conditions,
    CASE
        WHEN u_notes < 70 THEN NULL
        ELSE 'Synthetic row ' || i || '; illustrative figure'
    END AS notes,
    strftime(start_date, '%Y-%m-%d') AS effective_start,
    strftime(end_date, '%Y-%m-%d') AS effective_end,
    -- Made-up figures name no source (docs/raw-format.md, "Provenance"): `source_kind` says
    -- so on every row, and the source columns stay empty.
    NULL AS source_document,
    NULL AS source_url,
    NULL AS page_number,
    -- The detail columns, sparse as in real schedules: most lines need none of them.
    CASE
        WHEN u_action_details >= 20 THEN NULL
        WHEN action = 'make' THEN 'Adding displayed liquidity'
        WHEN action = 'take' THEN 'Removing liquidity, including routed-and-returned orders'
        ELSE 'Orders executed in the ' || ['opening', 'closing', 'halt'][1 + u_label % 3]
            || ' cross'
    END AS action_details,
    CASE
        WHEN u_participant_details >= 10 THEN NULL
        WHEN participant = 'market_maker' THEN 'Designated Market Maker (DMM)'
        ELSE 'Members in the Retail Liquidity Program'
    END AS participant_details,
    CASE
        WHEN volume_tier IS NULL OR u_volume_criteria >= 50 THEN NULL
        WHEN fee_type = 'equity' THEN 'Consolidated ADV (shares)'
        ELSE 'National customer ADV in multiply-listed options'
    END AS volume_criteria,
    CASE
        WHEN fee_type = 'equity' OR u_symbols >= 8 THEN NULL
        ELSE ['SPY, QQQ, IWM', 'SPX, VIX', 'AAPL, TSLA, NVDA'][1 + u_symbols % 3]
    END AS symbols,
    CASE WHEN u_excluded < 2 AND fee_type = 'option' THEN 'SPX, VIX, XSP' END AS excluded_symbols,
    CASE
        WHEN u_exclusions < 5 THEN 'Excludes QCCs and transactions described in Endnote 12'
    END AS exclusions,
    CASE WHEN u_extra_info < 5 THEN 'Payable to the first billable side, "Member" only'
    END AS extra_info,
    'illustrative' AS source_kind,
    NULL AS date_basis,
    'false' AS uncertain,
    NULL AS line_name,
    NULL AS standard,
    NULL AS complete_scope,
    NULL AS complete_as_of,
    -- The dimensions (schema 6), as the label and conditions word them. A third of the lines
    -- that pay or earn per execution carry a fee code of their own (its line number in hex),
    -- so fills drawn from the version each find one line.
    CASE
        WHEN fee_category = 'fees_and_rebates' AND u_fee_code < 35 THEN 'S' || printf('%X', line)
    END AS fee_codes,
    CASE
        WHEN fee_category <> 'fees_and_rebates' OR action <> 'make' THEN NULL
        WHEN u_label % 4 = 1 THEN 'displayed'
        WHEN u_label % 4 = 2 THEN 'non_displayed'
    END AS display,
    CASE
        WHEN fee_type = 'equity' AND u_conditions >= 75 AND u_conditions < 83 THEN 'at_or_above_1'
    END AS price_band,
    CASE WHEN fee_category = 'fees_and_rebates' AND action = 'take' AND u_label % 3 = 1 THEN 'C'
    END AS tapes,
    CASE WHEN starts_with(volume_tier, 'Tier ') THEN volume_tier END AS tier
FROM dated
-- Explicit order by the row number keeps files byte-identical with any thread count.
ORDER BY i
) TO $path (HEADER, DELIMITER ',')
