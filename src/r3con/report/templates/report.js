// The r3con run report. Everything shown from the run folder (documents, notes, records, model replies)
// is untrusted text: it goes into the page through textContent and text nodes only, never as markup,
// and links are only ever built here, to places in this page ("#...").
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("r3con-data").textContent);
  var PAGE = 200;

  function el(tag, cls, children) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) { return; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function text(tag, cls, value) { var n = el(tag, cls); n.textContent = value === null || value === undefined ? "" : String(value); return n; }
  function link(hash, label, cls) { var a = text("a", cls, label); a.setAttribute("href", "#" + hash); return a; }
  var BADGE = {none: "not found", mismatch: "differs from the document"};
  function badge(kind) { return text("span", "badge " + (kind || "none"), BADGE[kind || "none"] || kind); }
  // what a mismatched record's passage says against its document, one line per difference
  function differenceList(r) {
    return el("ul", "differences", (r._mismatch || []).map(function (d) {
      return el("li", "", [text("span", "kind", d.kind + ": "), "document says ", text("span", "doc-says", "\u201c" + (d.document || "") + "\u201d"),
        ", record says ", text("span", "record-says", "\u201c" + (d.record || "") + "\u201d")]);
    }));
  }
  function ungroundedNote(fields) {
    return text("div", "ungrounded-note", "Values in neither its passage nor its document: " + fields.join(", "));
  }
  function plural(n, one, many) { return n.toLocaleString() + " " + (n === 1 ? one : (many || one + "s")); }
  // a message as a person reads it: without the exception class a Python error begins with
  function plain(message) { return String(message || "").replace(/^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exceeded|Cancelled|Interrupt|Exit)\w*:\s*/, ""); }
  function show(value) { return value === null || value === undefined ? "" : (typeof value === "object" ? JSON.stringify(value) : String(value)); }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } return node; }

  // -- indexes --------------------------------------------------------------------------------------
  var docs = {}, recordsById = {}, recordsByDoc = {}, notesByDoc = {};
  data.documents.forEach(function (d) { docs[String(d.doc)] = d; });
  Object.keys(data.records).forEach(function (table) {
    data.records[table].forEach(function (r) {
      var entry = {table: table, record: r};
      if (r._id) { recordsById[String(r._id)] = entry; }
      (recordsByDoc[String(r._doc)] = recordsByDoc[String(r._doc)] || []).push(entry);
    });
  });
  Object.keys(data.notes).forEach(function (key) {
    var doc = key.split(".")[0];
    (notesByDoc[doc] = notesByDoc[doc] || []).push(key);
  });
  function docTitle(doc) { var d = docs[String(doc)]; return d ? d.title : ""; }
  function idParts(value) { return String(value).replace(/^R/, "").split(".").map(Number); }

  // -- answer ---------------------------------------------------------------------------------------
  function renderAnswer() {
    var body = document.getElementById("answer-body");
    if (data.error) {
      var during = data.error.stage ? " during " + data.error.stage : "";
      var banner = data.error.kind === "interrupted"
        ? "The run was stopped" + during + " before it finished; its folder keeps what it did, and resuming it pays only for the rest."
        : "The run did not finish: it failed" + during + (plain(data.error.error) ? ": " + plain(data.error.error) : "") + ".";
      var node = text("div", "error", banner);
      node.setAttribute("data-testid", "run-warning");
      body.appendChild(node);
    }
    (data.fallbacks || []).forEach(function (f) {
      var node = text("div", "fallback", fallbackSentence(f));
      node.setAttribute("data-testid", "run-warning");
      body.appendChild(node);
    });
    if (data.problems.length) {
      body.appendChild(el("div", "problems", [text("strong", "", "Files of the run folder that could not be read:"),
        el("ul", "", data.problems.map(function (p) { return text("li", "", p); }))]));
    }
    var answer = text("div", "answer-text", data.answer === null || data.answer === undefined ? "(no answer: the run ended before it)" : data.answer);
    answer.setAttribute("data-testid", "answer");
    body.appendChild(answer);
    var stats = data.evidence_stats;
    if (stats && stats.records) {
      body.appendChild(text("p", "muted", stats.verified + " of " + stats.records + " records' passages were found in their documents (" +
        Math.round(100 * stats.verified / stats.records) + "%: " + ["exact", "tolerant", "fuzzy"].map(function (k) {
          return (stats.by_match[k] || 0) + " " + k; }).join(", ") + ")" +
        (stats.by_match.mismatch ? "; " + stats.by_match.mismatch + (stats.by_match.mismatch === 1 ? " differs" : " differ") + " from its document in a value" : "") +
        (stats.ungrounded ? "; " + stats.ungrounded + " records have values in neither their passage nor their document" : "") +
        (stats.dropped ? "; " + stats.dropped + " dropped" : "") + "."));
    }
    body.appendChild(text("h2", "", "Evidence the answer cites"));
    if (!data.evidence.length) { body.appendChild(text("p", "muted", "The answer cites no record or document.")); }
    var list = el("ol", "evidence");
    data.evidence.forEach(function (e) {
      var cite = link(e.kind === "record" ? "rec/" + e.id : "doc/" + e.doc, "[" + e.id + "]", "cite");
      cite.setAttribute("data-testid", "citation");
      var item = el("li", "", [cite, " ",
        link("doc/" + e.doc, e.title + " (document " + e.doc + ")")]);
      if (e.kind === "record") { item.appendChild(badge(e.match)); }
      if (e.kind === "record" && e.ungrounded && e.ungrounded.length) { item.appendChild(text("span", "badge ungrounded", "ungrounded: " + e.ungrounded.join(", "))); }
      if (e.passage) { item.appendChild(text("blockquote", e.match === "mismatch" ? "mismatch" : "", e.passage)); }
      if (e.match === "mismatch" && e.differences && e.differences.length) { item.appendChild(differenceList({_mismatch: e.differences})); }
      if (e.kind === "record" && e.ungrounded && e.ungrounded.length) { item.appendChild(ungroundedNote(e.ungrounded)); }
      list.appendChild(item);
    });
    body.appendChild(list);
    if ((data.unsupported_numbers || []).length) {
      var unsupported = el("div", "unsupported", [text("strong", "", "Numbers in the answer that nothing it cites states: ")]);
      data.unsupported_numbers.forEach(function (n, i) {
        if (i) { unsupported.appendChild(document.createTextNode(", ")); }
        unsupported.appendChild(text("code", "", n));
      });
      unsupported.appendChild(text("span", "muted", " (not in the cited records' values or passages, the cited documents, the question, nor the agent's code output)"));
      body.appendChild(unsupported);
    }
    if (data.unknown_citations.length) {
      body.appendChild(text("p", "muted", "Cited but naming no record or document of the run: " + data.unknown_citations.join(", ")));
    }
    if (data.dropped.length) {
      body.appendChild(text("p", "muted", plural(data.dropped.length, "record") + (data.dropped.length === 1 ? " was" : " were") + " dropped because their passage is not in their document (dropped_records.json)."));
    }
  }

  // "The schema stage failed (...), so the answer came from the notes alone."
  function fallbackSentence(f) {
    return "The " + show(f.stage) + " stage failed (" + plain(f.failed) + "), so " + String(f.fallback || "the run went on without it").replace(/\.$/, "") + ".";
  }
  function fellBack(stage) { return (data.fallbacks || []).filter(function (f) { return f.stage === stage; })[0]; }

  // -- documents ------------------------------------------------------------------------------------
  var docLinks = {};
  function renderDocList() {
    var list = document.getElementById("doc-list"), frag = document.createDocumentFragment();
    data.documents.forEach(function (d) {
      var n = (recordsByDoc[String(d.doc)] || []).length;
      var a = link("doc/" + d.doc, d.doc + ". " + d.title + (n ? " (" + plural(n, "record") + ")" : ""));
      a.setAttribute("data-search", (d.doc + " " + d.title + " " + (d.source || "")).toLowerCase());
      docLinks[String(d.doc)] = a;
      frag.appendChild(el("li", "", [a]));
    });
    list.appendChild(frag);
    document.getElementById("doc-filter").addEventListener("input", function (ev) {
      var q = ev.target.value.toLowerCase();
      Object.keys(docLinks).forEach(function (k) {
        docLinks[k].parentNode.hidden = q !== "" && docLinks[k].getAttribute("data-search").indexOf(q) < 0;
      });
    });
  }

  function noteNode(entry, plain) {
    var box = el("div", "note" + (plain ? " plain" : ""));
    if (entry.diff) {
      entry.diff.forEach(function (piece) {
        box.appendChild(piece[0] === "=" ? document.createTextNode(piece[1]) : text(piece[0] === "+" ? "ins" : "del", "", piece[1]));
      });
    } else {
      box.textContent = entry.note;
    }
    return box;
  }

  function renderNotes(view, doc) {
    var keys = (notesByDoc[doc] || []).slice().sort(function (a, b) { return Number(a.split(".")[1] || 0) - Number(b.split(".")[1] || 0); });
    view.appendChild(text("h3", "", "Relevance notes" + (data.rounds ? " (" + data.rounds + " rounds)" : "")));
    if (!keys.length) { view.appendChild(text("p", "muted", "No note for this document.")); return; }
    keys.forEach(function (key) {
      var stages = (data.reuse || {})[key];
      if (!stages || !earlierRun()) { return; }
      var line = Object.keys(stages).map(function (stage) {
        var top = stages[stage].top ? "; its top notes: " + stages[stage].top.map(function (k) { return "Document " + k; }).join(", ") : "";
        return stage + ": " + (stages[stage].reused ? "reused" : "recomputed") + " (" + stages[stage].why + top + ")";
      }).join("; ");
      view.appendChild(text("p", "muted", (keys.length > 1 ? "Part " + (key.split(".")[1] || "1") + ", " : "") +
                            "from the earlier run: " + line));
    });
    var toggle = el("input"); toggle.type = "checkbox"; toggle.checked = true; toggle.id = "show-changes";
    var label = el("label", "muted", [toggle, " show what each round changed (added, removed)"]);
    view.appendChild(label);
    var boxes = [];
    keys.forEach(function (key) {
      if (keys.length > 1) { view.appendChild(text("h4", "", "Part " + (key.split(".")[1] || "1"))); }
      data.notes[key].forEach(function (entry) {
        var head = "Round " + entry.round + (entry.diff ? " (" + Math.round(100 * entry.changed) + "% new)" : "");
        view.appendChild(text("div", "round", head));
        var box = noteNode(entry, false);
        boxes.push(box);
        view.appendChild(box);
        if (entry.refs && entry.refs.length) {
          var refs = el("div", "muted", ["Names: "]);
          entry.refs.forEach(function (ref, i) {
            if (i) { refs.appendChild(document.createTextNode(", ")); }
            refs.appendChild(link("doc/" + ref.split(".")[0], "document " + ref + " (" + docTitle(ref.split(".")[0]) + ")"));
          });
          view.appendChild(refs);
        }
      });
    });
    toggle.addEventListener("change", function () {
      boxes.forEach(function (b) { b.classList.toggle("plain", !toggle.checked); });
    });
  }

  function earlierRun() { return Boolean(((data.run || {}).reuse || {}).previous_run); }

  function recordSummary(r) {
    return Object.keys(r).filter(function (k) { return k.charAt(0) !== "_"; }).slice(0, 3)
      .map(function (k) { return k + ": " + show(r[k]); }).join("; ");
  }

  function renderText(view, doc, activeId) {
    var textValue = data.texts[doc];
    view.appendChild(text("h3", "", "Text"));
    if (textValue === undefined) { view.appendChild(text("p", "muted", "The text is not in this page (a large run keeps only the cited texts here; documents.jsonl holds them all).")); return null; }
    var spans = (recordsByDoc[doc] || []).filter(function (e) { return e.record._span; }).map(function (e) {
      return {start: e.record._span[0], end: e.record._span[1], id: String(e.record._id), mismatch: e.record._match === "mismatch"};
    });
    var cuts = [0, textValue.length];
    spans.forEach(function (s) { cuts.push(s.start, s.end); });
    cuts = cuts.filter(function (c, i, all) { return c >= 0 && c <= textValue.length && all.indexOf(c) === i; }).sort(function (a, b) { return a - b; });
    var pre = el("pre", "doc-text"), first = null;
    for (var i = 0; i + 1 < cuts.length; i++) {
      var a = cuts[i], b = cuts[i + 1], piece = textValue.slice(a, b);
      var ids = spans.filter(function (s) { return s.start <= a && s.end >= b; }).map(function (s) { return s.id; });
      if (!ids.length) { pre.appendChild(document.createTextNode(piece)); continue; }
      var mark = text("mark", spans.some(function (s) { return s.mismatch && ids.indexOf(s.id) >= 0; }) ? "mismatch" : "", piece);
      mark.setAttribute("data-ids", ids.join(" "));
      mark.title = ids.join(", ");
      if (activeId && ids.indexOf(activeId) >= 0) { mark.classList.add("active"); mark.setAttribute("data-testid", "passage-mark"); first = first || mark; }
      pre.appendChild(mark);
    }
    pre.addEventListener("click", function (ev) {
      var ids = ev.target.getAttribute && ev.target.getAttribute("data-ids");
      if (ids) { location.hash = "#rec/" + ids.split(" ")[0]; }
    });
    view.appendChild(pre);
    return first;
  }

  function showDoc(doc, activeId) {
    Object.keys(docLinks).forEach(function (k) { docLinks[k].classList.toggle("current", k === doc); });
    var view = clear(document.getElementById("doc-view")), d = docs[doc];
    if (!d) {
      view.appendChild(text("p", "muted", data.documents_total > data.documents.length
        ? "Document " + doc + " is not in this page, which lists the documents it mentions of a large run (documents.jsonl holds it)."
        : "No document " + doc + " in this run."));
      return;
    }
    view.setAttribute("data-doc", doc);
    view.appendChild(text("h2", "", d.title + " (document " + d.doc + ")"));
    view.appendChild(text("p", "muted", [d.source, d.chars !== undefined ? d.chars.toLocaleString() + " characters" : "",
      d.parts > 1 ? d.parts + " parts" : ""].filter(Boolean).join(" · ")));
    var active = activeId ? recordsById[activeId] : null;
    if (active) {
      var r = active.record;
      var box = el("div", "active-record" + (r._span ? "" : " error"), [text("strong", "", "Record " + activeId + " (" + active.table + ")"), badge(r._match),
        " ", link("answer", "back to the answer"), text("div", "", recordSummary(r))]);
      if (!r._span) { box.appendChild(text("div", "", "Its passage was not found in this document. The model gave: " + show(r._passage))); }
      if (r._match === "mismatch") {
        box.classList.add("error");
        box.appendChild(text("div", "", "Its passage aligns here but differs in a value. The model gave: " + show(r._passage)));
        box.appendChild(differenceList(r));
      }
      if (r._ungrounded && r._ungrounded.length) { box.appendChild(ungroundedNote(r._ungrounded)); }
      view.appendChild(box);
    }
    renderNotes(view, doc);
    var mine = recordsByDoc[doc] || [];
    view.appendChild(text("h3", "", "Records (" + plural(mine.length, "record") + ")"));
    if (mine.length) {
      var table = el("table", "grid doc-records"), body = el("tbody");
      mine.forEach(function (e) {
        body.appendChild(el("tr", e.record._id === activeId ? "current" : "", [el("td", "", [link("rec/" + e.record._id, String(e.record._id), "cite")]),
          text("td", "", e.table), text("td", "", recordSummary(e.record)), el("td", "", [badge(e.record._match)].concat(
            e.record._ungrounded && e.record._ungrounded.length ? [text("span", "badge ungrounded", "ungrounded: " + e.record._ungrounded.join(", "))] : []))]));
      });
      table.appendChild(body);
      view.appendChild(table);
    }
    var mark = renderText(view, doc, activeId);
    if (mark) { mark.scrollIntoView({block: "center"}); } else { window.scrollTo(0, 0); }
  }

  // -- records --------------------------------------------------------------------------------------
  var tableNames = Object.keys(data.records), state = {table: tableNames[0], sort: null, dir: 1, limit: PAGE};
  function columns(table) {
    var seen = ["_id", "_doc"];
    data.records[table].forEach(function (r) {
      Object.keys(r).forEach(function (k) { if (k.charAt(0) !== "_" && seen.indexOf(k) < 0) { seen.push(k); } });
    });
    return seen.filter(function (k) { return !samePassage(table, k); }).concat(["_passage", "_match"]);
  }
  // a field whose every value is the record's passage (a schema's "evidence" or "quote") says nothing the
  // passage column does not: shown once
  function samePassage(table, k) {
    if (k === "_id" || k === "_doc") { return false; }
    var rows = data.records[table], any = false;
    for (var i = 0; i < rows.length; i++) {
      var v = rows[i][k];
      if (v === null || v === undefined || v === "") { continue; }
      if (String(v).trim() !== String(rows[i]._passage || "").trim()) { return false; }
      any = true;
    }
    return any;
  }
  function label(c) { return c === "_id" ? "id" : c === "_doc" ? "document" : c === "_passage" ? "passage" : c === "_match" ? "found" : c; }
  function compare(a, b) {
    if (a === b) { return 0; }
    if (a === null || a === undefined || a === "") { return 1; }
    if (b === null || b === undefined || b === "") { return -1; }
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    var sa = show(a), sb = show(b);
    if (/^R\d+(\.\d+)+$/.test(sa) && /^R\d+(\.\d+)+$/.test(sb)) {
      var pa = idParts(sa), pb = idParts(sb);
      for (var i = 0; i < Math.max(pa.length, pb.length); i++) { if ((pa[i] || 0) !== (pb[i] || 0)) { return (pa[i] || 0) - (pb[i] || 0); } }
      return 0;
    }
    var na = Number(sa), nb = Number(sb);
    if (sa.trim() !== "" && sb.trim() !== "" && !isNaN(na) && !isNaN(nb)) { return na - nb; }
    return sa.localeCompare(sb);
  }
  var searchCache = {};
  function searchText(r) {
    var key = String(r._id);
    if (!(key in searchCache)) { searchCache[key] = Object.keys(r).map(function (k) { return show(r[k]); }).join(" ").toLowerCase(); }
    return searchCache[key];
  }
  function renderRecords() {
    var thead = clear(document.querySelector("#record-table thead")), tbody = clear(document.querySelector("#record-table tbody"));
    var count = document.getElementById("record-count"), more = document.getElementById("record-more");
    if (!state.table) { count.textContent = "No records in this run."; more.hidden = true; return; }
    var cols = columns(state.table), q = document.getElementById("record-filter").value.toLowerCase();
    var match = document.getElementById("match-filter").value;
    var rows = data.records[state.table].filter(function (r) {
      var kind = match === "ungrounded" ? (r._ungrounded && r._ungrounded.length ? "ungrounded" : "") : (r._match || "none");
      return (!match || kind === match) && (!q || searchText(r).indexOf(q) >= 0);
    });
    if (state.sort) {
      rows = rows.slice().sort(function (a, b) { return state.dir * compare(a[state.sort], b[state.sort]) || compare(a._id, b._id); });
    }
    var head = el("tr");
    cols.forEach(function (c) {
      var th = text("th", "", label(c));
      th.setAttribute("data-col", c);
      th.setAttribute("aria-sort", state.sort === c ? (state.dir > 0 ? "ascending" : "descending") : "none");
      th.addEventListener("click", function () {
        state.dir = state.sort === c ? -state.dir : 1; state.sort = c; state.limit = PAGE; renderRecords();
      });
      head.appendChild(th);
    });
    thead.appendChild(head);
    var frag = document.createDocumentFragment();
    rows.slice(0, state.limit).forEach(function (r) {
      var tr = el("tr");
      tr.setAttribute("data-id", String(r._id));
      cols.forEach(function (c) {
        if (c === "_id") { tr.appendChild(el("td", "", [link("rec/" + r._id, String(r._id), "cite")])); }
        else if (c === "_doc") { tr.appendChild(el("td", "", [link("doc/" + r._doc, r._doc + (r._part ? "." + r._part : "") + " " + docTitle(r._doc))])); }
        else if (c === "_match") {
          var cell = el("td", "", [badge(r._match)]);
          if (r._match === "mismatch") { cell.appendChild(differenceList(r)); }
          tr.appendChild(cell);
        }
        else if (r._ungrounded && r._ungrounded.indexOf(c) >= 0) {
          var flagged = text("td", "ungrounded", show(r[c]));
          flagged.title = "in neither the record's passage nor its document";
          flagged.setAttribute("data-ungrounded", "true");
          tr.appendChild(flagged);
        }
        else { tr.appendChild(text("td", c === "_passage" ? "passage" : "", show(r[c]))); }
      });
      Array.prototype.forEach.call(tr.children, function (td, i) { td.setAttribute("data-label", label(cols[i])); });
      frag.appendChild(tr);
    });
    tbody.appendChild(frag);
    var folded = Object.keys(data.records[state.table][0] || {}).filter(function (k) { return k.charAt(0) !== "_" && cols.indexOf(k) < 0; });
    count.textContent = rows.length + " of " + plural(data.records[state.table].length, "record") + (rows.length > state.limit ? " (showing " + state.limit + ")" : "") +
      (folded.length ? "; " + folded.join(", ") + " repeat" + (folded.length === 1 ? "s" : "") + " the passage, shown once" : "");
    more.hidden = rows.length <= state.limit;
  }
  function setupRecords() {
    var holder = document.getElementById("record-tables");
    if (tableNames.length > 1) {
      tableNames.forEach(function (name) {
        var b = text("button", name === state.table ? "current" : "", name + " (" + plural(data.records[name].length, "record") + ")");
        b.type = "button";
        b.addEventListener("click", function () {
          state = {table: name, sort: null, dir: 1, limit: PAGE};
          Array.prototype.forEach.call(holder.children, function (x) { x.classList.toggle("current", x === b); });
          renderRecords();
        });
        holder.appendChild(b);
      });
    } else if (state.table) { holder.appendChild(text("strong", "", state.table)); }
    document.getElementById("record-filter").addEventListener("input", function () { state.limit = PAGE; renderRecords(); });
    document.getElementById("match-filter").addEventListener("change", function () { state.limit = PAGE; renderRecords(); });
    document.getElementById("record-more").addEventListener("click", function () { state.limit += PAGE; renderRecords(); });
    renderRecords();
  }

  // -- schema, agent --------------------------------------------------------------------------------
  function renderSchema() {
    var body = document.getElementById("schema-body");
    body.appendChild(text("h2", "", "Schema"));
    var failed = fellBack("schema");
    if (failed) {
      var warning = text("div", "fallback", fallbackSentence(failed) + (data.schema_attempts ? " It was tried " + plural(data.schema_attempts, "time") + "." : ""));
      warning.setAttribute("data-testid", "run-warning");
      body.appendChild(warning);
    }
    if (!data.schema_tables.length) {
      if (!failed) { body.appendChild(text("p", "muted", data.settings.structuring === false ? "No schema: structuring was turned off for this run." : "No schema in this run folder: the run ended before it.")); }
      return;
    }
    body.appendChild(text("p", "muted", "The tables the model proposed for this question. Population also asks each record for _passage (the sentence it comes from); r3con adds _id, _doc, _span and _match."));
    data.schema_tables.forEach(function (t) {
      body.appendChild(text("h3", "", t.name + " (" + plural((data.records[t.name] || []).length, "record") + ")"));
      if (t.description) { body.appendChild(text("p", "", t.description)); }
      var table = el("table", "grid"), tb = el("tbody");
      table.appendChild(el("thead", "", [el("tr", "", [text("th", "", "field"), text("th", "", "type"), text("th", "", "required"), text("th", "", "description")])]));
      t.fields.forEach(function (f) {
        tb.appendChild(el("tr", "", [text("td", "", f.name), text("td", "", f.type), text("td", "", f.required ? "yes" : ""), text("td", "", f.description)]));
      });
      table.appendChild(tb);
      body.appendChild(table);
    });
    body.appendChild(el("details", "", [text("summary", "", "schema.json"), text("pre", "json", JSON.stringify(data.schema, null, 2))]));
  }
  function renderAgent() {
    var body = document.getElementById("agent-body"), t = data.transcript;
    body.appendChild(text("h2", "", "The agent's transcript"));
    var fell = fellBack("reason") || (t.mode === "direct" && data.settings.reasoning !== "direct" ? (data.fallbacks || [])[0] : null);
    if (fell) {
      var warning = text("div", "fallback", fallbackSentence(fell));
      warning.setAttribute("data-testid", "run-warning");
      body.appendChild(warning);
    }
    if (!t.steps) { body.appendChild(text("p", "muted", "No transcript in this run folder.")); return; }
    body.appendChild(text("p", "muted", "Mode: " + (t.mode === "direct" ? "direct (one call over the notes" + (data.schema_tables.length ? " and records" : "") + ", no code)" : show(t.mode)) + (t.capped ? "; stopped at the step bound" : "") +
      (t.isolation && t.isolation.missing ? "; sandbox layers missing: " + (t.isolation.missing.length ? t.isolation.missing.join(", ") : "none") : "")));
    t.steps.forEach(function (s) {
      var step = el("div", "step", [text("h3", "", "Step " + show(s.step)), text("pre", "output", s.reply)]);
      if (s.code) { step.appendChild(text("div", "round", "Code")); step.appendChild(text("pre", "code", s.code)); }
      if (s.observation) { step.appendChild(text("div", "round", "Output")); step.appendChild(text("pre", "output", s.observation)); }
      if (s.error) { step.appendChild(text("div", "error", plain(s.error))); }
      body.appendChild(step);
    });
  }

  // -- navigation -----------------------------------------------------------------------------------
  var views = ["answer", "documents", "records", "schema", "agent", "inputs", "usage", "settings"];
  function showView(name) {
    views.forEach(function (v) { document.getElementById(v).classList.toggle("shown", v === name); });
    Array.prototype.forEach.call(document.querySelectorAll("#tabs a"), function (a) {
      a.classList.toggle("current", a.getAttribute("href") === "#" + name);
    });
  }
  function route() {
    var hash = decodeURIComponent(location.hash.replace(/^#/, "")) || "answer";
    var slash = hash.indexOf("/"), view = slash < 0 ? hash : hash.slice(0, slash), arg = slash < 0 ? "" : hash.slice(slash + 1);
    if (view === "rec") {
      var entry = recordsById[arg];
      showView("documents");
      if (entry) { showDoc(String(entry.record._doc), arg); } else { showDoc("", null); }
    } else if (view === "doc") {
      showView("documents"); showDoc(arg, null);
    } else {
      showView(views.indexOf(view) >= 0 ? view : "answer");
      if (view === "documents" && !document.getElementById("doc-view").getAttribute("data-doc") && data.documents.length) {
        showDoc(String(data.documents[0].doc), null);
      }
    }
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest ? ev.target.closest("a[href^='#']") : null;
    if (a && a.getAttribute("href") === location.hash) { route(); }  // the same link again: show it again
  });
  window.addEventListener("hashchange", route);

  renderAnswer();
  renderDocList();
  setupRecords();
  renderSchema();
  renderAgent();
  route();
  document.documentElement.setAttribute("data-ready", String(Math.round(performance.now())));
})();
