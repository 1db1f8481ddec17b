"""The dataset reader: one published version, by job.

version.py    open a version and check it against its manifest; the questions it answers
engine.py     the DuckDB boundary: connection, a cursor per query, the time limit, errors
watchdog.py   the one thread that interrupts queries past their time limit
queries.py    a selection, the fields an answer prints, and the SQL (the registry, downloads)
index.py      the results index: which records a selection matches, and what they hold
order.py      the results' matches in an answer's order, by place
pager.py      one pager for every ordered answer: a page, or a download's chunks
changes.py    the change list: the changes of the matching lines, by place
lines.py      a fee line's records, by its id
classes.py    the class index: per venue, the lowest and highest record compared
records.py    records by position, as the history answers print them
printed.py    records by position, as a results page, a supplier page and a record by id print
              them, and a record found by its id
pricing.py    what executions cost: each fill's line among the candidates its keys find
price_keys.py the price keys and lines: the lines a fee code, action or tier names, by binary
              search, and what the rule reads and an answer prints of them
rollups.py    the discovery counts, searched in memory
venues.py     what each venue holds, built from the rollups at open
watcher.py    the version in use, and the thread that swaps in a newly published one
sources.py    where versions are read from: a directory, or S3 through a local mirror
"""
