"use strict";
// The dashboard: asks POST /api/query, then shows each part of the answer. Text that comes from
// the API reaches the page only as text nodes (through el()), never parsed as HTML.
(() => {
  const KEY_STORE = "tortus-pg.api-key";
  const MAX_MAP_IDS = 300; // the server's cap on /api/map
  const TAU = 2 * Math.PI;
  const COLOURS = {
    neighbour: "#b3bac4", pruned: "#d9822b", evidence: "#6a4fb8", seed: "#1f6fd1", path: "#128a4f", portal: "#c2185b",
  };
  const BUDGETS = { ms: "Time (ms)", hops: "Hops", tokens: "Evidence tokens", portal_hops: "Portal hops" };

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value !== null && value !== undefined) node.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function fmt(value) {
    if (value === null || value === undefined) return "–";
    if (typeof value !== "number" || Number.isInteger(value)) return String(value);
    return value.toFixed(3);
  }

  function where(uri, span, page) {
    return `${uri}, chars ${span[0]}–${span[1]}` + (page ? `, page ${page}` : "");
  }

  function rowsOrEmpty(table, rows, message) {
    const columns = table.tHead.rows[0].cells.length;
    table.tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: columns }, message))]));
  }

  function setState(state, message) {
    document.body.dataset.state = state;
    $("status").textContent = message;
    $("status").className = state === "error" ? "error" : "";
    $("submit").disabled = state === "busy";
  }

  async function call(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${$("api-key").value.trim()}` },
      body: JSON.stringify(body),
    });
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const error = data && data.error;
      throw new Error(error ? `${response.status} ${error.code}: ${error.message}` : `HTTP ${response.status}`);
    }
    return data;
  }

  // --- the answer, its citations and warnings ---

  function renderAnswer(a) {
    $("question-echo").replaceChildren(el("span", { class: "label" }, "Question: "), a.question);
    const shown = a.withheld || !a.answer
      ? [el("p", { class: "refused" }, "Not enough evidence to answer."),
        el("p", {}, "Refusal: ", el("code", {}, a.refusal || "none")),
        a.diagnostics.draft ? el("p", { class: "draft" }, "Withheld draft: ", a.diagnostics.draft) : null]
      : [el("p", { class: "answer" }, a.answer),
        a.short_answer ? el("p", {}, "Short answer: ", el("strong", {}, a.short_answer)) : null];
    $("answer").replaceChildren(...shown.filter(Boolean));
    $("confidence").textContent = `Confidence ${fmt(a.confidence)}`;
    $("warnings").replaceChildren(...a.warnings.map((w) => el("li", {}, w)));
    const citations = a.claims.map((c) => el("li", { value: c.citation },
      el("q", {}, c.text), " — ",
      c.evidence === null ? where(c.uri, c.span, c.page)
        : el("a", { href: `#evidence-${c.evidence}` }, where(c.uri, c.span, c.page)),
      c.support ? ` (${c.support})` : null));
    $("citations").replaceChildren(...(citations.length ? citations : [el("li", {}, "No claims cited.")]));
  }

  function renderBudget(budget) {
    $("budget").replaceChildren(...Object.entries(budget).map(([name, { used, limit }]) => {
      const label = BUDGETS[name] || name;
      const fill = el("span", { class: "fill" });
      fill.style.width = `${limit ? Math.min(100, (100 * used) / limit) : 0}%`;
      const bar = el("div", {
        class: limit && used > limit ? "bar over" : "bar", role: "meter", "aria-label": label,
        "aria-valuemin": 0, "aria-valuemax": limit, "aria-valuenow": used,
      }, fill);
      return el("div", { class: "budget" }, el("span", { class: "budget-name" }, label), bar,
        el("span", { class: "budget-value" }, `${fmt(used)} of ${fmt(limit)}`));
    }));
  }

  // --- the path, the evidence in context, the pruned candidates ---

  function renderHops(path) {
    rowsOrEmpty($("hops"), path.map((hop, i) => el("tr", { class: hop.edge_type === "portal" ? "portal" : null },
      el("td", { class: "num" }, i + 1),
      el("td", {}, hop.from),
      el("td", { class: "edge-type" }, hop.edge_type),
      el("td", {}, hop.to),
      el("td", { class: "num" }, fmt(hop.weight)),
      el("td", { class: "num" }, fmt(hop.torus_distance)),
      el("td", {}, hop.reason || "–", hop.shard_crossing ? el("span", { class: "tag" }, "crosses shards") : null),
      el("td", {}, ...(hop.evidence || []).map((e) => el("div", { title: e.text }, where(e.uri, e.span, e.page)))),
    )), "No path: the answer rests on no walked hop.");
  }

  // Claims' spans are offsets in the source, as is the chunk's own span: the claim starts
  // claim.start - chunk.start characters into the chunk's text. Offsets count code points.
  function highlight(text, start, claims) {
    const chars = Array.from(text);
    const spans = claims
      .map((c) => ({ from: Math.max(0, c.span[0] - start), to: Math.min(chars.length, c.span[1] - start), claim: c }))
      .filter((s) => s.from < s.to)
      .sort((x, y) => x.from - y.from);
    const parts = [];
    let at = 0;
    for (const s of spans) {
      if (s.from < at) continue; // overlapping claims: the first is marked
      parts.push(chars.slice(at, s.from).join(""),
        el("mark", { title: `claim [${s.claim.citation}]` }, chars.slice(s.from, s.to).join("")),
        el("sup", {}, `[${s.claim.citation}]`));
      at = s.to;
    }
    parts.push(chars.slice(at).join(""));
    return parts;
  }

  function renderEvidence(evidence, claims) {
    $("evidence").replaceChildren(...evidence.map((e, i) => el("article", { class: "chunk", id: `evidence-${i}` },
      el("h3", {}, e.label),
      el("p", { class: "meta" }, `${where(e.uri, e.span, e.page)} · ${e.origin} · score ${fmt(e.score)}`),
      el("blockquote", { class: "source-text" },
        ...highlight(e.text, e.span[0], claims.filter((c) => c.evidence === i && c.span))))));
    if (!evidence.length) $("evidence").replaceChildren(el("p", {}, "No evidence was found."));
  }

  function renderPruned(d) {
    const pruned = d.pruned || [];
    $("pruned-note").textContent = `${pruned.length} of ${d.pruned_total} pruned candidates shown`
      + (pruned.length < d.pruned_total ? " (tick Explain to list all)." : ".");
    rowsOrEmpty($("pruned"), pruned.map((p) => el("tr", {},
      el("td", { class: "num" }, p.node_id), el("td", {}, p.label), el("td", {}, p.kind),
      el("td", { class: "num" }, fmt(p.hop)), el("td", { class: "reason" }, p.reason))), "Nothing was pruned.");
  }

  function renderDiagnostics(a) {
    const d = a.diagnostics;
    rowsOrEmpty($("seeds"), d.seeds.map((s) => el("tr", {},
      el("td", { class: "num" }, s.rank), el("td", { class: "num" }, s.node_id), el("td", {}, s.label),
      el("td", { class: "num" }, fmt(s.bm25_rank)), el("td", { class: "num" }, fmt(s.vector_rank)))), "No seeds.");
    const portals = (d.portals || []).map((p) => el("li", {}, `${p.stage}: ${p.allowed ? "allowed" : "not allowed"} — ${p.why}`));
    $("portals").replaceChildren(...(portals.length ? portals : [el("li", {}, "No portal decision.")]));
    const facts = {
      "Answer type": d.answer_type, "Reached chunks": d.reached_chunks, "Coverage": fmt(d.coverage),
      "Missing terms": (d.missing_terms || []).join(", ") || "none", "Torus radius": fmt(d.radius),
      "Shard crossings": d.shard_crossings, "Degraded stages": (d.degraded || []).join(", ") || "none",
      "Timings (ms)": Object.entries(d.timings || {}).map(([k, v]) => `${k.replace(/_ms$/, "")} ${v}`).join(", "),
      "Trace": a.trace_id,
    };
    $("diag-facts").replaceChildren(...Object.entries(facts).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, fmt(v))]));
    $("raw").textContent = JSON.stringify(a, null, 2);
  }

  // --- the torus map ---

  // Plotly reads a few HTML tags in hover text: escape the API's text before handing it over.
  const plotlyText = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const hover = (n) => `${plotlyText(n.label)}<br>${n.kind} ${n.node_id} · θ ${n.theta.toFixed(2)}, φ ${n.phi.toFixed(2)}`;

  function points(name, nodes, marker) {
    return { name, type: "scatter", mode: "markers", x: nodes.map((n) => n.theta), y: nodes.map((n) => n.phi),
      text: nodes.map(hover), hoverinfo: "text", marker };
  }

  function gap(a, b) {
    let d = (b - a) % TAU;
    if (d > Math.PI) d -= TAU;
    if (d < -Math.PI) d += TAU;
    return d;
  }

  // Hops as lines the shortest way round: one that crosses the seam is drawn as two halves,
  // each leaving the square on one side, which the plot clips.
  function hops(name, path, byId, colour, dash) {
    const x = [], y = [], text = [];
    for (const hop of path) {
      const from = byId.get(hop.from_id), to = byId.get(hop.to_id);
      if (!from || !to) continue;
      const dt = gap(from.theta, to.theta), dp = gap(from.phi, to.phi);
      const tip = `${plotlyText(hop.from)} —${hop.edge_type}→ ${plotlyText(hop.to)}`;
      x.push(from.theta, from.theta + dt, null); y.push(from.phi, from.phi + dp, null); text.push(tip, tip, null);
      if (Math.abs(from.theta + dt - to.theta) > 1e-9 || Math.abs(from.phi + dp - to.phi) > 1e-9) {
        x.push(to.theta - dt, to.theta, null); y.push(to.phi - dp, to.phi, null); text.push(tip, tip, null);
      }
    }
    return { name, type: "scatter", mode: "lines+markers", x, y, text, hoverinfo: "text", cliponaxis: true,
      line: { color: colour, width: 3, dash }, marker: { color: colour, size: 9, symbol: "diamond" } };
  }

  const axis = (title) => ({
    // The square keeps its range and shrinks to stay square, so hops across the seam are clipped.
    title: { text: title }, range: [0, TAU], constrain: "domain", zeroline: false,
    tickvals: [0, Math.PI / 2, Math.PI, 1.5 * Math.PI, TAU], ticktext: ["0", "π/2", "π", "3π/2", "2π"],
  });

  async function drawMap(a) {
    const d = a.diagnostics;
    const ids = (list) => new Set(list.filter((id) => id !== null && id !== undefined));
    const seeds = ids(d.seeds.map((s) => s.node_id));
    const onPath = ids(a.path.flatMap((h) => [h.from_id, h.to_id]));
    const evidence = ids(a.evidence.map((e) => e.node_id));
    const pruned = ids((d.pruned || []).map((p) => p.node_id));
    const asked = [...new Set([...seeds, ...onPath, ...evidence, ...pruned])].slice(0, MAX_MAP_IDS);
    if (!asked.length) {
      $("map-note").textContent = "Nothing to place on the torus.";
      return;
    }
    const { nodes } = await call("/api/map", { node_ids: asked });
    const placed = nodes.filter((n) => n.theta !== null);
    const byId = new Map(placed.map((n) => [n.node_id, n]));
    const pick = (set) => [...set].map((id) => byId.get(id)).filter(Boolean);
    const traces = [
      points("neighbours", placed.filter((n) => n.neighbour), { color: COLOURS.neighbour, size: 5 }),
      points("pruned candidates", pick(pruned), { color: COLOURS.pruned, size: 7, symbol: "x" }),
      hops("path", a.path.filter((h) => h.edge_type !== "portal"), byId, COLOURS.path, "solid"),
      hops("portal hops", a.path.filter((h) => h.edge_type === "portal"), byId, COLOURS.portal, "dash"),
      points("evidence", pick(evidence), { color: COLOURS.evidence, size: 14, symbol: "square-open", line: { width: 2 } }),
      points("seeds", pick(seeds), { color: COLOURS.seed, size: 11, line: { color: "#fff", width: 1 } }),
    ].filter((t) => t.x.length);
    const layout = {
      xaxis: axis("θ (radians)"), yaxis: { ...axis("φ (radians)"), scaleanchor: "x" },
      height: 620, margin: { l: 60, r: 20, t: 10, b: 50 }, hovermode: "closest",
      legend: { orientation: "h", y: -0.12 }, plot_bgcolor: "#fbfcfd",
    };
    await Plotly.react("torus-map", traces, layout, { responsive: true, displaylogo: false });
    const unplaced = nodes.length - placed.length;
    $("map-note").textContent = `${placed.length - placed.filter((n) => n.neighbour).length} nodes of the answer `
      + `and ${placed.filter((n) => n.neighbour).length} direct neighbours placed`
      + (unplaced ? `; ${unplaced} without torus coordinates.` : ".");
  }

  // --- the form ---

  async function ask(event) {
    event.preventDefault();
    localStorage.setItem(KEY_STORE, $("api-key").value.trim());
    const body = { question: $("question").value, k: Number($("k").value) || 5, explain: $("explain").checked };
    if ($("max-hops").value) body.max_hops = Number($("max-hops").value);
    if ($("min-support").value) body.min_support = Number($("min-support").value);
    setState("busy", "Asking…");
    try {
      const answer = await call("/api/query", body);
      $("result").hidden = false;
      renderAnswer(answer);
      renderBudget(answer.budget);
      renderHops(answer.path);
      renderEvidence(answer.evidence, answer.claims);
      renderPruned(answer.diagnostics);
      renderDiagnostics(answer);
      setState("busy", "Placing the nodes on the torus…");
      await drawMap(answer);
      setState("done", `Answered in ${fmt(answer.budget.ms.used)} ms (trace ${answer.trace_id}).`);
    } catch (error) {
      setState("error", error.message);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("api-key").value = localStorage.getItem(KEY_STORE) || "";
    $("forget-key").addEventListener("click", () => {
      localStorage.removeItem(KEY_STORE);
      $("api-key").value = "";
    });
    $("ask").addEventListener("submit", ask);
  });
})();
