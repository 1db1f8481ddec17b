// The fee explorer (`service/pages/explore.py`): three views over the public API, each a URL.
//   ?view=venue&venue=CODE   a venue's coverage over time and its current fee lines
//   ?view=line&line=ID       one fee line's history as a step chart
//   ?view=compare&as_of=...  the venues ranked, best for the member first
// Everything comes from `/api/v1` with the user's key; the charts are SVG drawn here.
"use strict";

(function () {
  const config = JSON.parse(document.getElementById("explore-config").textContent);
  const API = "/api/v1";
  const PAGE_SIZE = 100; // the API's largest page
  const KEY_ITEM = "fees-explorer-key"; // this tab's storage: a key never goes in a shared URL
  const SVG = "http://www.w3.org/2000/svg";
  const DAY_MS = 86400000;
  const TODAY = new Date().toISOString().slice(0, 10); // UTC, as the API's "today"
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  const keyInput = document.getElementById("key");
  let key = sessionStorage.getItem(KEY_ITEM) || config.key || "";
  let shown = 0; // the latest render: an older one's late answers are dropped

  // ------------------------------------------------------------------ building nodes

  function set(node, attributes) {
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    return node;
  }

  function fill(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "object" ? child : String(child));
    }
    return node;
  }

  function el(tag, attributes, ...children) {
    return fill(set(document.createElement(tag), attributes), children);
  }

  function draw(tag, attributes, ...children) {
    return fill(set(document.createElementNS(SVG, tag), attributes), children);
  }

  // ------------------------------------------------------------------ the API

  class Failure extends Error {
    // `details`: the exchange family's list of `{field, message, allowed?}` (a 422's).
    constructor(status, message, retryAfter, details) {
      super(message);
      this.status = status;
      this.retryAfter = retryAfter;
      this.details = details || [];
    }
  }

  function address(path, params) {
    const url = new URL(API + path, window.location.origin);
    for (const [name, value] of Object.entries(params || {})) {
      for (const one of [].concat(value)) {
        if (one !== "" && one !== null && one !== undefined) url.searchParams.append(name, one);
      }
    }
    return url;
  }

  async function get(path, params) {
    const headers = { Accept: "application/json" };
    if (key) headers["x-service-api-access-key"] = key; // the exchange family's header
    let response;
    try {
      response = await fetch(address(path, params), { headers: headers });
    } catch (error) {
      throw new Failure(0, "The server could not be reached.");
    }
    if (response.ok) return response.json();
    let message = response.status + " " + response.statusText;
    let details = [];
    try {
      const body = await response.json();
      message = (body.error && body.error.message) || message;
      details = (body.error && body.error.details) || [];
    } catch (ignored) {
      // not JSON: the status line says enough
    }
    const retryAfter = Number(response.headers.get("Retry-After"));
    throw new Failure(response.status, message, retryAfter, details);
  }

  // Every page of a paged listing, in order.
  async function every(path, params) {
    const items = [];
    for (let page = 0; ; page += 1) {
      const body = await get(path, { ...params, page_size: PAGE_SIZE, page_number: page });
      items.push(...body.data);
      if (page + 1 >= body.meta.total_pages) return items;
    }
  }

  // ------------------------------------------------------------------ words and numbers

  function words(value) {
    return value === null || value === undefined ? "" : String(value).replaceAll("_", " ");
  }

  // A text's words, for the lines filter: a typed word matches a word that begins with it, so
  // "add" finds "adding" and "added", while "displayed" does not find "non-displayed" (a
  // hyphenated word is one word).
  function wordsOf(text) {
    return text
      .toLowerCase()
      .split(/[^\p{L}\p{N}$.%-]+/u)
      .filter(Boolean);
  }

  // The API's units (README, "Amounts and units"), as a sentence says them.
  const UNITS = {
    per_share: "per share",
    per_contract: "per contract",
    per_order: "per order",
    per_port: "per port",
    per_month: "per month",
    per_year: "per year",
    one_time: "once",
    per_million_dollars_of_value: "per $1M of value",
    percent_of_value: "of value",
    other: "(other unit)",
  };

  // An amount's figure, without its sign: "$0.0029", "0.5%".
  function figure(amount, unit) {
    const text = String(amount)
      .replace(/^-/, "")
      .replace(/(\.\d*?[1-9])0+$|\.0+$/, "$1");
    return unit === "percent_of_value" ? text + "%" : "$" + text;
  }

  // An amount as a member reads it, "rebate $0.0029": a rebate (negative) is paid to them.
  function priced(amount, unit) {
    return (String(amount).startsWith("-") ? "rebate " : "fee ") + figure(amount, unit);
  }

  // The same with its unit: "rebate $0.0029 per share".
  function money(amount, unit) {
    if (amount === null || amount === undefined) return "no figure";
    return priced(amount, unit) + " " + (UNITS[unit] || words(unit));
  }

  // An axis label: the figure with its sign ("−$0.0034" for a rebate).
  function signed(amount, unit) {
    return (String(amount).startsWith("-") ? "−" : "") + figure(amount, unit);
  }

  function provenance(record) {
    const parts = [record.source_kind + " source", "date " + record.date_basis];
    if (record.uncertain) parts.push("uncertain");
    if (record.standard) parts.push("standard rate");
    return parts.join(", ");
  }

  // The last day a source shows the record's figure in force (`confirmed_through`), said when a
  // later day of its period rests on a presumption.
  function confirmation(record) {
    const end = record.effective_end || TODAY;
    return record.confirmed_through < end ? "last confirmed " + record.confirmed_through : "";
  }

  function period(record) {
    return record.effective_start + " to " + (record.effective_end || "no known end");
  }

  // A record's source, linked when it has a web address (only http and https: the ingest
  // requires one, but a version published before it did may hold a `javascript:` link).
  function sourceLink(record) {
    if (!/^https?:\/\//i.test(record.source_link || "")) return record.source_document || "";
    return el(
      "a",
      { href: record.source_link, rel: "noopener noreferrer", target: "_blank" },
      record.source_document || record.source_link,
    );
  }

  function lineLink(lineId, text) {
    return el("a", { href: "?" + new URLSearchParams({ view: "line", line: lineId }) }, text);
  }

  // ------------------------------------------------------------------ views and their URLs

  const VIEWS = { venue: venueView, line: lineView, compare: compareView };

  function go(params, replace) {
    const kept = Object.entries(params).filter(([, value]) => value !== "" && value !== null);
    const url = "?" + new URLSearchParams(kept);
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
  }

  async function render() {
    const params = new URLSearchParams(window.location.search);
    const name = VIEWS[params.get("view")] ? params.get("view") : "venue";
    for (const link of document.querySelectorAll("nav a[data-view]")) {
      set(link, { "aria-current": link.dataset.view === name ? "page" : "false" });
    }
    const ticket = ++shown;
    view.setAttribute("aria-busy", "true");
    view.replaceChildren(el("p", { class: "loading" }, "Loading…"));
    let content;
    try {
      content = await VIEWS[name](params);
    } catch (error) {
      content = failure(error);
    }
    if (ticket !== shown) return;
    view.replaceChildren(...[content].flat(Infinity));
    view.setAttribute("aria-busy", "false");
    const heading = view.querySelector("h2");
    document.title = (heading ? heading.textContent + " · " : "") + "Fee explorer";
  }

  function failure(error) {
    if (!(error instanceof Failure)) {
      // A fault of the page's own, not an answer of the service's: say so, never go blank.
      return el(
        "section",
        { class: "notice error" },
        el("h2", {}, "The page failed"),
        el("p", {}, String(error)),
      );
    }
    if (error.status === 401) return keyPrompt();
    const retry = el("button", { type: "button", onclick: render }, "Retry");
    if (error.status === 429) return rateLimited(error, retry);
    const titles = { 0: "No answer", 403: "Outside this key's scope", 404: "Not found" };
    return el(
      "section",
      { class: "notice error" },
      el("h2", {}, titles[error.status] || "The service answered " + error.status),
      el("p", {}, error.message),
      error.status === 0 || error.status >= 500 ? retry : null,
    );
  }

  function keyPrompt() {
    return el(
      "section",
      { id: "key-prompt", class: "notice" },
      el("h2", {}, "An API key is needed"),
      el(
        "p",
        {},
        key ? "The service did not accept this key." : "Enter an API key to see the data.",
      ),
      keyForm("prompt-key"),
    );
  }

  // A 429: the page tries again once the service says the key may.
  function rateLimited(error, retry) {
    const seconds = error.retryAfter || 1;
    setTimeout(function () {
      if (view.contains(retry)) render();
    }, seconds * 1000);
    return el(
      "section",
      { id: "rate-limited", class: "notice" },
      el("h2", {}, "Too many requests"),
      el("p", {}, "This key's rate limit is spent. Retrying in " + seconds + " s."),
      retry,
    );
  }

  function keyForm(id) {
    const input = el("input", {
      id: id,
      type: "password",
      autocomplete: "off",
      spellcheck: "false",
    });
    input.value = key;
    return el(
      "form",
      { class: "key", onsubmit: (event) => useKey(event, input) },
      el("label", { for: id }, "API key"),
      input,
      el("button", { type: "submit" }, "Use key"),
    );
  }

  function useKey(event, input) {
    event.preventDefault();
    key = input.value.trim();
    keyInput.value = key;
    sessionStorage.setItem(KEY_ITEM, key);
    render();
  }

  // ------------------------------------------------------------------ the venue view

  async function venueView(params) {
    const venues = (await get("/exchanges/")).data;
    const asked = params.get("venue");
    const picker = venuePicker(venues, asked || "");
    const pick = (note) => [el("h2", {}, "Pick a venue"), picker, note];
    if (!asked) {
      return pick(el("p", { class: "empty" }, "Type a venue's code, name or alias, then Show."));
    }
    const venue = await venueNamed(asked);
    if (venue === null) {
      const note = `No venue with records is called “${asked}”.`;
      return pick(el("p", { class: "notice error", id: "no-venue" }, note));
    }
    if (venue.name !== asked) {
      params.set("venue", venue.name);
      go(Object.fromEntries(params), true);
    }
    const [changes, lines] = await Promise.all([
      every("/fee-changes/", { exchange_name: venue.name }),
      every("/fee-schedule-results/", {
        exchange_name: venue.name,
        latest_only: "true",
        include_source: "true",
      }),
    ]);
    return [
      el("h2", {}, venue.display_name + " (" + venue.name + ")"),
      picker,
      el("h3", {}, "Fee lines in force, month by month"),
      coverageChart(changes),
      el("h3", {}, "Current fee lines"),
      linesTable(lines, params),
    ];
  }

  // Details resolve an alias to the venue's code; null for a name nobody uses, or a venue with
  // no records (a 404): then the picker stays, to try another.
  async function venueNamed(asked) {
    try {
      return (await get("/exchanges/" + encodeURIComponent(asked))).data;
    } catch (error) {
      if (!(error instanceof Failure) || error.status !== 404) throw error;
      return null;
    }
  }

  function venuePicker(venues, chosen) {
    const input = el("input", {
      id: "venue",
      list: "venues",
      autocomplete: "off",
      placeholder: "memx, MEMX, Members Exchange…",
    });
    input.value = chosen;
    return el(
      "form",
      {
        class: "picker",
        role: "search",
        onsubmit: function (event) {
          event.preventDefault();
          if (!input.value.trim()) return;
          go({ view: "venue", venue: input.value.trim() });
          render();
        },
      },
      el("label", { for: "venue" }, "Venue"),
      input,
      el(
        "datalist",
        { id: "venues" },
        venues.map((venue) => el("option", { value: venue.name }, venue.display_name)),
      ),
      el("button", { type: "submit" }, "Show"),
    );
  }

  // Lines in force at each month's end, by category, replayed from the venue's changes:
  // `added` starts a line on its date, `removed` ends it (the day after its last).
  function coverage(changes) {
    if (!changes.length) return { months: [], categories: [] };
    const categories = [...new Set(changes.map((change) => change.fee_category))].sort();
    const first = changes[0].effective_date.slice(0, 7);
    const lastChange = changes[changes.length - 1].effective_date.slice(0, 7);
    const last = lastChange > TODAY.slice(0, 7) ? lastChange : TODAY.slice(0, 7);
    const inForce = Object.fromEntries(categories.map((category) => [category, 0]));
    const months = [];
    let next = 0;
    for (let month = first; month <= last; month = nextMonth(month)) {
      const end = monthEnd(month);
      while (next < changes.length && changes[next].effective_date <= end) {
        const change = changes[next++];
        if (change.change_type === "added") inForce[change.fee_category] += 1;
        if (change.change_type === "removed") inForce[change.fee_category] -= 1;
      }
      months.push({ month: month, end: end, counts: { ...inForce } });
    }
    return { months: months, categories: categories };
  }

  function nextMonth(month) {
    const [year, number] = month.split("-").map(Number);
    return number === 12 ? year + 1 + "-01" : year + "-" + String(number + 1).padStart(2, "0");
  }

  function monthEnd(month) {
    const [year, number] = month.split("-").map(Number);
    return new Date(Date.UTC(year, number, 0)).toISOString().slice(0, 10);
  }

  function coverageChart(changes) {
    const { months, categories } = coverage(changes);
    if (!months.length) return el("p", { class: "empty" }, "This venue has no fee lines.");
    const width = chartWidth(),
      height = 220,
      left = 40,
      bottom = 24,
      top = 8;
    const most = Math.max(1, ...months.map((m) => total(m.counts)));
    const band = (width - left) / months.length;
    const y = (count) => top + (height - top - bottom) * (1 - count / most);
    const chart = draw(
      "svg",
      {
        class: "chart coverage",
        viewBox: `0 0 ${width} ${height}`,
        role: "img",
        "aria-label": `Fee lines in force at each month's end, ${months[0].month} to ${months[months.length - 1].month}, at most ${most}`,
      },
      draw("line", { class: "axis", x1: left, x2: width, y1: y(0), y2: y(0) }),
      draw("text", { class: "tick", x: left - 6, y: y(most) + 4, "text-anchor": "end" }, most),
      draw("text", { class: "tick", x: left - 6, y: y(0), "text-anchor": "end" }, 0),
    );
    months.forEach(function (month, index) {
      const x = left + index * band;
      chart.append(coverageMonth(month, categories, { x, band, y }));
      if (month.month.endsWith("-01") || index === 0) {
        chart.append(draw("text", { class: "tick", x: x, y: height - 6 }, month.month.slice(0, 4)));
      }
    });
    const legend = el(
      "ul",
      { class: "legend" },
      categories.map((category, place) =>
        el("li", {}, el("span", { class: "swatch category-" + place }), words(category)),
      ),
    );
    return el("figure", {}, chart, el("figcaption", {}, legend));
  }

  // One month's bar: a rectangle per category with lines in force, stacked, at `x`.
  function coverageMonth(month, categories, { x, band, y }) {
    const count = total(month.counts);
    const detail = categories
      .filter((c) => month.counts[c])
      .map((c) => `${words(c)} ${month.counts[c]}`);
    const group = draw(
      "g",
      { class: "month", "data-month": month.month, "data-end": month.end, "data-total": count },
      draw(
        "title",
        {},
        `${month.month}: ${count} lines in force on ${month.end}` +
          (detail.length ? ` (${detail.join(", ")})` : ""),
      ),
    );
    let stacked = 0;
    categories.forEach(function (category, place) {
      const n = month.counts[category];
      if (!n) return;
      group.append(
        draw("rect", {
          class: "category-" + place,
          x: x + 0.5,
          width: Math.max(band - 1, 1),
          y: y(stacked + n),
          height: y(stacked) - y(stacked + n),
        }),
      );
      stacked += n;
    });
    return group;
  }

  // Charts are drawn at the width they are shown at (at most 960 px), so their text keeps
  // its size on a phone.
  function chartWidth() {
    return Math.round(Math.min(960, Math.max(320, view.clientWidth - 24)));
  }

  function total(counts) {
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  }

  const LINE_COLUMNS = [
    { key: "fee_charge_type", title: "Label" },
    { key: "fee_category", title: "Category" },
    { key: "fee_action", title: "Action" },
    { key: "fee_participant", title: "Participant" },
    { key: "amount", title: "Amount", numeric: true },
    { key: "effective_start", title: "Since", nowrap: true },
    { key: "source_kind", title: "Provenance" },
    { key: "source_document", title: "Source" },
  ];

  function cell(record, column) {
    switch (column.key) {
      case "fee_charge_type":
        return lineLink(record.line_id, record.fee_charge_type);
      case "amount":
        return el("span", { title: record.fee_amount }, money(record.amount, record.unit));
      case "source_kind":
        return provenance(record);
      case "source_document":
        return sourceLink(record);
      default:
        return words(record[column.key]);
    }
  }

  // Rows by `column`, ascending (direction 1) or descending (-1); missing values last either way.
  function compareValues(column, direction) {
    return function (a, b) {
      const x = a[column.key],
        y = b[column.key];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      const order = column.numeric ? Number(x) - Number(y) : String(x).localeCompare(String(y));
      return direction * order;
    };
  }

  // Whether a line's label, action, participant, category and unit have, for each typed word,
  // a word beginning with it.
  function hasEveryWord(line, terms) {
    const text = [
      line.fee_charge_type,
      line.fee_action,
      line.fee_participant,
      line.fee_category,
      line.unit,
    ]
      .map(words)
      .join(" ");
    const said = wordsOf(text);
    return terms.every((term) => said.some((word) => word.startsWith(term)));
  }

  // A column's header: a button that sorts by it, and again the other way.
  function sortHeader(column, state, update) {
    const sorted = state.sort === column.key;
    return el(
      "th",
      {
        scope: "col",
        "aria-sort": sorted ? (state.dir === "asc" ? "ascending" : "descending") : "none",
      },
      el(
        "button",
        {
          type: "button",
          onclick: function () {
            state.dir = sorted && state.dir === "asc" ? "desc" : "asc";
            state.sort = column.key;
            update();
          },
        },
        column.title,
        sorted ? (state.dir === "asc" ? " ▲" : " ▼") : "",
      ),
    );
  }

  function linesTable(lines, params) {
    const state = linesState(params);
    const { search, category } = lineFilters(lines, state);
    const body = el("tbody");
    const head = el("tr");
    const count = el("p", { class: "count", id: "line-count" });
    const table = el("table", { class: "lines" }, el("thead", {}, head), body);

    function update() {
      keepInAddress(state);
      const visible = linesShown(lines, state);
      head.replaceChildren(...LINE_COLUMNS.map((column) => sortHeader(column, state, update)));
      body.replaceChildren(...visible.map(lineRow));
      count.textContent = `${visible.length} of ${lines.length} lines`;
    }

    search.addEventListener("input", function () {
      state.q = search.value.trim();
      update();
    });
    category.addEventListener("change", function () {
      state.category = category.value;
      update();
    });
    update();
    if (!lines.length)
      return el("p", { class: "empty" }, "No fee line of this venue is in force today.");
    return [
      el(
        "div",
        { class: "filters" },
        el("label", { for: "line-filter" }, "Filter"),
        search,
        el("label", { for: "category-filter" }, "Category"),
        category,
        count,
      ),
      el("div", { class: "scroll" }, table),
    ];
  }

  // The lines table's choices, as the link carries them.
  function linesState(params) {
    return {
      q: params.get("q") || "",
      category: params.get("category") || "",
      sort: params.get("sort") || "fee_charge_type",
      dir: params.get("dir") === "desc" ? "desc" : "asc",
    };
  }

  // The address carries the table's choices (an empty one left out), so a link shows the same.
  function keepInAddress(state) {
    const params = new URLSearchParams(window.location.search);
    for (const [name, value] of Object.entries(state)) {
      if (value) params.set(name, value);
      else params.delete(name);
    }
    go(Object.fromEntries(params), true);
  }

  // The lines table's word filter and category choice, showing the state the link carries.
  function lineFilters(lines, state) {
    const categories = [...new Set(lines.map((line) => line.fee_category))].sort();
    const search = el("input", {
      id: "line-filter",
      type: "search",
      placeholder: "add displayed, tier 1…",
    });
    search.value = state.q;
    const category = el(
      "select",
      { id: "category-filter" },
      el("option", { value: "" }, "every category"),
      categories.map((c) => el("option", { value: c }, words(c))),
    );
    category.value = state.category;
    return { search, category };
  }

  // The lines of the category chosen holding every word typed, in the order chosen.
  function linesShown(lines, state) {
    const terms = wordsOf(state.q);
    const sorter = compareValues(
      LINE_COLUMNS.find((c) => c.key === state.sort) || LINE_COLUMNS[0],
      state.dir === "asc" ? 1 : -1,
    );
    return lines
      .filter((line) => !state.category || line.fee_category === state.category)
      .filter((line) => hasEveryWord(line, terms))
      .sort(sorter);
  }

  function lineRow(line) {
    return el(
      "tr",
      { "data-line-id": line.line_id },
      LINE_COLUMNS.map((c) => el("td", { class: c.nowrap ? "nowrap" : null }, cell(line, c))),
    );
  }

  // ------------------------------------------------------------------ the fee line view

  async function lineView(params) {
    const id = params.get("line");
    if (!id) {
      return el("p", { class: "empty" }, "Open a fee line from a venue's table of current lines.");
    }
    const line = (await get("/fee-lines/" + encodeURIComponent(id))).data;
    const venue = "?" + new URLSearchParams({ view: "venue", venue: line.exchange_name });
    const identity = ["fee_type", "fee_category", "fee_action", "fee_participant"]
      .map((name) => words(line[name]))
      .join(" · ");
    return [
      el("h2", {}, line.label),
      el("p", { class: "identity" }, el("a", { href: venue }, line.exchange_name), " · ", identity),
      historyChart(line.records),
      el(
        "p",
        {},
        el(
          "button",
          { type: "button", id: "download", onclick: () => download(line) },
          "Download the history (CSV)",
        ),
      ),
      recordsTable(line.records),
    ];
  }

  // A step of `amount` over each record's period; a marker where the figure changes.
  function historyChart(records) {
    const drawn = records.filter((record) => record.amount !== null);
    const note =
      records.length > drawn.length
        ? el(
            "p",
            { class: "note" },
            `${records.length - drawn.length} of ${records.length} records have no figure to draw (see the table).`,
          )
        : null;
    if (!drawn.length)
      return el("p", { class: "empty" }, "No record of this line has a figure to draw.");
    const scale = historyScale(drawn);
    const chart = historyAxes(scale, drawn[0].unit, drawn.length);
    let previous = null;
    drawn.forEach(function (record, index) {
      chart.append(historyStep(scale, record, index, previous));
      previous = { amount: record.amount, unit: record.unit, end: scale.ends[index] };
    });
    const legend = el(
      "p",
      { class: "legend-line" },
      "Each step is a record's period; a dot marks a new figure; dashed steps are announced, not yet in force; a faded step is presumed, after the last day a source shows the figure; hover or focus a step for its source.",
    );
    return el("figure", {}, chart, el("figcaption", {}, legend, note));
  }

  // Where the history chart puts each day and amount: from the first record's start to a
  // little after today or the last known end, and from the lowest amount (or 0) to the highest.
  function historyScale(drawn) {
    const scale = { width: chartWidth(), height: 260, left: 90, right: 16, top: 16, bottom: 28 };
    scale.time = (date) => Date.parse(date + "T00:00:00Z");
    scale.starts = drawn.map((r) => scale.time(r.effective_start));
    scale.ends = drawn.map((r) => (r.effective_end ? scale.time(r.effective_end) + DAY_MS : null));
    scale.first = Math.min(...scale.starts);
    const known = scale.ends.filter((end) => end !== null);
    const latest = Math.max(scale.time(TODAY), ...scale.starts, ...known);
    scale.last = latest + Math.max((latest - scale.first) * 0.05, 30 * DAY_MS);
    scale.amounts = drawn.map((r) => Number(r.amount));
    scale.low = Math.min(0, ...scale.amounts);
    scale.high = Math.max(0, ...scale.amounts);
    const span = scale.high - scale.low || 1;
    const wide = scale.width - scale.left - scale.right;
    scale.x = (t) => scale.left + (wide * (t - scale.first)) / (scale.last - scale.first);
    scale.y = (amount) =>
      scale.top + ((scale.height - scale.top - scale.bottom) * (scale.high - amount)) / span;
    return scale;
  }

  // The chart's frame: the zero line, the amount ticks, today, and a rule at each 1 January.
  function historyAxes(scale, unit, periods) {
    const { width, height, left, right, top, bottom, x, y, time } = scale;
    const today = x(time(TODAY));
    const chart = draw(
      "svg",
      {
        class: "chart history",
        viewBox: `0 0 ${width} ${height}`,
        role: "img",
        "aria-label": `The line's amount over time: ${periods} periods`,
      },
      draw("line", { class: "axis zero", x1: left, x2: width - right, y1: y(0), y2: y(0) }),
      [scale.high, scale.low]
        .filter((v) => v !== 0)
        .concat([0])
        .map((v) =>
          draw(
            "text",
            { class: "tick", x: left - 6, y: y(v) + 4, "text-anchor": "end" },
            signed(v, unit),
          ),
        ),
      draw("line", { class: "today", x1: today, x2: today, y1: top, y2: height - bottom }),
      draw("text", { class: "tick", x: today, y: top - 4, "text-anchor": "middle" }, "today"),
    );
    const firstYear = new Date(scale.first).getUTCFullYear() + 1;
    for (let year = firstYear; Date.UTC(year, 0, 1) < scale.last; year++) {
      const at = x(Date.UTC(year, 0, 1));
      chart.append(
        draw("line", { class: "grid", x1: at, x2: at, y1: top, y2: height - bottom }),
        draw("text", { class: "tick", x: at, y: height - 8, "text-anchor": "middle" }, year),
      );
    }
    return chart;
  }

  // One record's step: its level (faded after the last day a source shows its figure), a
  // riser from the record before when they touch, and a dot when its figure is new.
  function historyStep(scale, record, index, previous) {
    const { x, y, starts, ends, amounts } = scale;
    const future = record.effective_start > TODAY;
    const end = ends[index] === null ? scale.last : ends[index];
    const confirmed = Math.min(scale.time(record.confirmed_through) + DAY_MS, end);
    const changed =
      previous === null || previous.amount !== record.amount || previous.unit !== record.unit;
    const text = stepText(record, future);
    const level = (from, to, name) =>
      draw("line", {
        class: name,
        x1: x(from),
        x2: x(to),
        y1: y(amounts[index]),
        y2: y(amounts[index]),
      });
    const group = draw(
      "g",
      {
        class: "step" + (future ? " future" : ""),
        tabindex: 0,
        "data-record-id": record.record_id,
        "aria-label": text,
      },
      draw("title", {}, text),
      level(starts[index], confirmed, "level"),
      confirmed < end ? level(confirmed, end, "level presumed") : null,
    );
    if (previous !== null && previous.end === starts[index] && previous.amount !== record.amount) {
      const at = x(starts[index]);
      const riser = { class: "riser", x1: at, x2: at, y1: y(Number(previous.amount)) };
      group.append(draw("line", { ...riser, y2: y(amounts[index]) }));
    }
    if (changed)
      group.append(
        draw("circle", { class: "marker", cx: x(starts[index]), cy: y(amounts[index]), r: 5 }),
      );
    return group;
  }

  // What a step says of its record: its period and figure, whether it is announced or presumed,
  // its provenance and its source.
  function stepText(record, future) {
    const shown = confirmation(record);
    return (
      `${period(record)}: ${record.fee_amount} (${money(record.amount, record.unit)})` +
      `${future ? ", announced" : ""}${shown ? ", " + shown : ""}; ${provenance(record)}; ` +
      (record.source_document || "no source named")
    );
  }

  const RECORD_FIELDS = [
    "record_id",
    "effective_start",
    "effective_end",
    "confirmed_through",
    "ended_by",
    "standard",
    "fee_charge_type",
    "fee_amount",
    "amount",
    "currency",
    "unit",
    "fee_basis",
    "source_kind",
    "date_basis",
    "uncertain",
    "source_document",
    "source_link",
  ];

  function recordsTable(records) {
    return table(
      "records",
      ["Period", "Last confirmed", "Amount", "As printed", "Provenance", "Source"],
      records.map((record) =>
        el(
          "tr",
          {
            "data-record-id": record.record_id,
            class: record.effective_start > TODAY ? "future" : null,
          },
          el("td", { class: "nowrap" }, period(record)),
          el("td", { class: "nowrap" }, record.confirmed_through),
          el("td", {}, money(record.amount, record.unit)),
          el("td", {}, record.fee_amount),
          el("td", {}, provenance(record)),
          el("td", {}, sourceLink(record)),
        ),
      ),
    );
  }

  // A table of `rows` under `titles`, in a box that scrolls sideways on a narrow screen.
  function table(name, titles, rows) {
    const head = el(
      "tr",
      {},
      titles.map((title) => el("th", { scope: "col" }, title)),
    );
    return el(
      "div",
      { class: "scroll" },
      el("table", { class: name }, el("thead", {}, head), el("tbody", {}, rows)),
    );
  }

  function csvField(value) {
    const text = value === null || value === undefined ? "" : String(value);
    return /[",\n\r]/.test(text) ? '"' + text.replaceAll('"', '""') + '"' : text;
  }

  function download(line) {
    const rows = [["line_id", "exchange_name", ...RECORD_FIELDS]].concat(
      line.records.map((record) => [
        line.line_id,
        line.exchange_name,
        ...RECORD_FIELDS.map((f) => record[f]),
      ]),
    );
    const text = rows.map((row) => row.map(csvField).join(",")).join("\r\n") + "\r\n";
    const href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    const link = el("a", { href: href, download: `fee-line-${line.line_id}.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(href), 1000);
    status.textContent = `Downloaded ${line.records.length} records.`;
  }

  // ------------------------------------------------------------------ the compare view

  const COMPARE_FIELDS = [
    "as_of",
    "fee_type",
    "fee_action",
    "fee_participant",
    "unit",
    "standard",
    "uncertain",
    "source_kind",
    "date_basis",
  ];
  const DEFAULT_UNIT = { equity: "per_share", option: "per_contract" };

  async function compareView(params) {
    const choices = (await get("/fee-schedule-results/filters")).data;
    const asked = Object.fromEntries(COMPARE_FIELDS.map((name) => [name, params.get(name) || ""]));
    asked.as_of = asked.as_of || TODAY;
    asked.fee_type = asked.fee_type || "equity";
    const unit = asked.unit || DEFAULT_UNIT[asked.fee_type] || "";
    let answer;
    try {
      answer = await get("/compare/", { ...asked, unit: unit });
    } catch (error) {
      // A shared link with a value the API refuses (an impossible date): keep the form, say
      // which field and why, so it can be put right.
      if (!(error instanceof Failure) || error.status !== 422) throw error;
      return [
        el("h2", {}, "Venues compared"),
        compareForm(choices, asked, error.details),
        refusal(error, asked),
      ];
    }
    return [
      el("h2", {}, `Venues compared on ${answer.meta.as_of}`),
      compareForm(choices, asked, []),
      ranking(answer),
    ];
  }

  const COMPARE_LABELS = {
    as_of: "On",
    fee_type: "Fee type",
    fee_action: "Action",
    fee_participant: "Participant",
    unit: "Unit",
    standard: "Rates",
    uncertain: "Figures",
    source_kind: "Sources",
    date_basis: "Dates",
  };

  // The API's refusal, one line per field, in the form's words: "On: 2025-02-30: must be a
  // real date in the form YYYY-MM-DD".
  function refusal(error, asked) {
    return el(
      "section",
      { id: "refused", class: "notice error", role: "alert" },
      el("h2", {}, "The comparison cannot be made as asked"),
      el(
        "ul",
        {},
        error.details.map((detail) =>
          el(
            "li",
            { "data-field": detail.field },
            `${COMPARE_LABELS[detail.field] || detail.field}: ` +
              (asked[detail.field] ? `"${asked[detail.field]}" ` : "") +
              detail.message +
              (detail.allowed ? ` (one of ${detail.allowed.join(", ")})` : ""),
          ),
        ),
      ),
    );
  }

  function compareForm(choices, asked, refused) {
    const fields = compareFields(choices);
    for (const name of COMPARE_FIELDS) {
      const field = fields[name];
      // A value the link carries that the list does not offer still shows as asked.
      const offered =
        field.tagName !== "SELECT" || [...field.options].some((o) => o.value === asked[name]);
      if (!offered) field.append(el("option", { value: asked[name] }, words(asked[name])));
      field.value = asked[name];
      if (refused.some((detail) => detail.field === name)) {
        set(field, { "aria-invalid": "true", "aria-describedby": "refused" });
      }
    }
    return el(
      "form",
      {
        class: "filters",
        id: "compare-form",
        onsubmit: function (event) {
          event.preventDefault();
          const values = Object.fromEntries(
            COMPARE_FIELDS.map((name) => [name, fields[name].value]),
          );
          go({ view: "compare", ...values });
          render();
        },
      },
      COMPARE_FIELDS.map((name) =>
        el(
          "span",
          { class: "field" },
          el("label", { for: name }, COMPARE_LABELS[name]),
          fields[name],
        ),
      ),
      el("button", { type: "submit" }, "Compare"),
    );
  }

  // The comparison's fields, by parameter name.
  function compareFields(choices) {
    return {
      as_of: el("input", { id: "as_of", type: "date", required: true }),
      fee_type: select("fee_type", choices.fee_types, false),
      fee_action: select("fee_action", choices.fee_actions, true),
      fee_participant: select("fee_participant", choices.fee_participants, true),
      unit: select("unit", Object.keys(UNITS), "the fee type's usual"),
      // Every line, or the venues' ordinary rates: no tier, programme or special code.
      standard: choice("standard", [["true", "standard rates only"]]),
      // A line with no known end counts as in force on any later day; its record says when
      // that end is in doubt, and the API can leave such records out.
      uncertain: choice("uncertain", [["false", "only those not in doubt"]]),
      // Provenance, as the API filters it: the venue's or a regulator's own text, and dates a
      // source states (or computes from another dated fact).
      source_kind: choice("source_kind", [["primary", "primary sources only"]]),
      date_basis: choice("date_basis", [
        ["stated", "stated dates only"],
        ["stated,derived", "stated or derived dates"],
      ]),
    };
  }

  // A select of a few worded choices after "all" (the parameter left out).
  function choice(id, worded) {
    return el(
      "select",
      { id: id },
      [["", "all"], ...worded].map(([value, text]) => el("option", { value: value }, text)),
    );
  }

  function select(id, values, any) {
    return el(
      "select",
      { id: id },
      any ? el("option", { value: "" }, any === true ? "any" : any) : null,
      (values || []).map((value) => el("option", { value: value }, words(value))),
    );
  }

  // The venues as bars on one signed axis: a rebate (below zero) to the left, a fee to the
  // right; the API's order, best for the member first.
  function ranking(answer) {
    const ranked = answer.data.filter((item) => item.lowest !== null);
    const apart = answer.data.filter((item) => item.lowest === null);
    const unit = answer.meta.unit;
    const parts = [];
    if (!ranked.length) {
      parts.push(
        el(
          "p",
          { class: "empty" },
          `No venue has a matching line in force with a figure ${UNITS[unit] || words(unit)}.`,
        ),
      );
    } else {
      parts.push(
        el(
          "figure",
          {},
          rankingChart(ranked, unit),
          el(
            "figcaption",
            {},
            "Each venue's best line for the member that day (the biggest rebate, or the smallest fee), ",
            UNITS[unit] || words(unit),
            `, among the lines a source showed in force within ${answer.meta.max_age_days} days before it. Open a bar for that line's history.`,
          ),
        ),
        bestLines(ranked),
      );
    }
    if (apart.length) parts.push(...apartList(apart, answer.meta.max_age_days));
    return parts;
  }

  // The ranked venues' bars on one signed axis. On a narrow screen, venues go by their codes,
  // so the bars keep room.
  function rankingChart(ranked, unit) {
    const width = chartWidth(),
      narrow = width < 600,
      row = 30,
      left = narrow ? 130 : 250,
      right = narrow ? 100 : 150,
      top = 8;
    const amounts = ranked.map((item) => Number(item.lowest.amount));
    const low = Math.min(0, ...amounts),
      high = Math.max(0, ...amounts);
    const span = high - low || 1;
    const x = (amount) => left + ((width - left - right) * (amount - low)) / span;
    const height = top * 2 + row * ranked.length;
    const chart = draw(
      "svg",
      {
        class: "chart ranking",
        viewBox: `0 0 ${width} ${height}`,
        role: "img",
        "aria-label": `${ranked.length} venues ranked by their best ${UNITS[unit] || words(unit)} amount, best for the member first`,
      },
      draw("line", { class: "axis zero", x1: x(0), x2: x(0), y1: 0, y2: height }),
    );
    const layout = { width, narrow, row, left, right, top, x };
    ranked.forEach((item, index) => chart.append(rankingBar(layout, item, index, amounts[index])));
    return chart;
  }

  // One venue's bar: a link to its best line's history, named and valued, with its source.
  function rankingBar(layout, item, index, amount) {
    const { width, narrow, row, left, right, top, x } = layout;
    const yTop = top + index * row;
    const best = item.lowest;
    const presumed = best.presumed ? `, presumed (last confirmed ${best.confirmed_through})` : "";
    const text =
      `${index + 1}. ${item.display_name}: ${best.fee_amount} (${money(best.amount, best.unit)}), ` +
      `"${best.label}", ${period(best)}${presumed}, ${provenance(best)}; ${item.lines} lines compared; ` +
      (best.source_document || "");
    return draw(
      "a",
      {
        href: "?" + new URLSearchParams({ view: "line", line: best.line_id }),
        class: "bar" + (amount < 0 ? " rebate" : " fee"),
        "data-exchange": item.exchange_name,
        "data-amount": best.amount,
        "aria-label": text,
      },
      draw("title", {}, text),
      draw("rect", {
        x: Math.min(x(0), x(amount)),
        width: Math.max(Math.abs(x(amount) - x(0)), 1),
        y: yTop + 4,
        height: row - 8,
      }),
      draw(
        "text",
        { class: "name", x: left - 8, y: yTop + row / 2 + 4, "text-anchor": "end" },
        `${index + 1}. ${narrow ? item.exchange_name : item.display_name}`,
      ),
      draw(
        "text",
        { class: "value", x: width - right + 8, y: yTop + row / 2 + 4 },
        narrow ? signed(best.amount, best.unit) : priced(best.amount, best.unit),
      ),
    );
  }

  // The venues with nothing compared, and why.
  function apartList(apart, maxAgeDays) {
    return [
      el("h3", {}, "Nothing to compare"),
      el(
        "ul",
        { class: "apart", id: "apart" },
        apart.map((item) =>
          el(
            "li",
            { "data-exchange": item.exchange_name },
            item.display_name,
            item.lines_in_other_units
              ? ` (${item.lines_in_other_units} matching lines in another unit or with no figure)`
              : item.left_out_stale
                ? ` (${item.left_out_stale} matching lines, none confirmed within ${maxAgeDays} days)`
                : " (no matching line in force)",
          ),
        ),
      ),
    ];
  }

  // The ranking as a table: each venue's best and worst line in words, with its source.
  function bestLines(ranked) {
    return table(
      "ranked",
      ["#", "Venue", "Best for the member", "Worst", "Lines compared", "Source"],
      ranked.map((item, index) =>
        el(
          "tr",
          { "data-exchange": item.exchange_name },
          el("td", {}, index + 1),
          el("td", {}, item.display_name),
          el(
            "td",
            {},
            lineLink(item.lowest.line_id, item.lowest.label),
            el("br"),
            money(item.lowest.amount, item.lowest.unit),
            el("br"),
            el(
              "small",
              {},
              [period(item.lowest), confirmation(item.lowest), provenance(item.lowest)]
                .filter(Boolean)
                .join("; "),
            ),
          ),
          el("td", {}, money(item.highest.amount, item.highest.unit)),
          el("td", {}, item.lines),
          el("td", {}, sourceLink(item.lowest)),
        ),
      ),
    );
  }

  // ------------------------------------------------------------------ start

  keyInput.value = key;
  document
    .getElementById("key-form")
    .addEventListener("submit", (event) => useKey(event, keyInput));
  document.addEventListener("click", function (event) {
    // Links within the page change the view without reloading it.
    const link = event.target.closest("a[href^='?'], nav a[data-view]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    history.pushState(null, "", link.getAttribute("href"));
    render();
    view.focus();
  });
  window.addEventListener("popstate", render);
  render();
})();
