// eaglekit's accept-length calculator: the front end of eaglekit.view.calculator.Calculator (an anywidget).
// Everything is computed here, in the browser, with the same formulas as eaglekit.core.speedup.specmath and
// eaglekit.core.serving.account (Leviathan et al. 2023; the accept length counts the bonus token), so the
// calculator works the same with a kernel (JupyterLab) and without one (the rendered report).
// tests/view/test_browser.py checks compute() against the Python functions for a grid of scenarios. With a verify
// growth g (ms per drafted token, the slope of eaglekit.core.serving.costmodel's verify), the verify of j drafts is the
// verify at k plus (j - k) g.

const CONTROLS = [
  // name, label, min, max, step
  ["baseline_tps", "baseline tok/s", 1, 400, 1],
  ["verify_ms", "verify ms / cycle", 1, 200, 0.5],
  ["verify_growth_ms", "verify growth ms / step", 0, 50, 0.01],
  ["draft_ms", "draft ms / step", 0, 20, 0.01],
  ["steps", "draft steps k", 1, 10, 1],
  ["overhead_ms", "overhead ms / cycle", 0, 50, 0.5],
  ["accept_length", "accept length", 1, 11, 0.01],
  ["alpha", "alpha (per token)", 0, 0.99, 0.01],
  ["target_tps", "target tok/s", 1, 600, 1],
];

function geometric(a, k) {
  let s = 0;
  for (let i = 0; i <= k; i++) s += Math.pow(a, i);
  return s;
}

export function expectedAcceptLength(alpha, k) {
  return k === null ? 1 / (1 - alpha) : geometric(alpha, k);
}

export function alphaForAcceptLength(L, k) {
  if (k === null) return 1 - 1 / L;
  if (L <= 1) return 0;
  if (L >= k + 1) return 1;
  let lo = 0, hi = 1;
  for (let i = 0; i < 64; i++) {
    const mid = (lo + hi) / 2;
    if (geometric(mid, k) < L) lo = mid; else hi = mid;
  }
  return (lo + hi) / 2;
}

function reach(T, fixed, k, d, g) {
  // eaglekit.core.speedup.specmath.reach: the draft cost at which k steps just reach T, and the fewest steps at d when
  // the verify grows g ms per drafted token (the cycle at m steps is fixed - k g + m (d + g))
  const start = fixed - k * g, step = d + g;
  const need = (m) => T * (start + m * step) / 1000;
  const spare = ((k + 1) * 1000 / T - fixed) / k;
  const a = T * step / 1000;
  let m = null;
  if (need(1) <= 2) m = 1;
  else if (a < 1) {
    m = Math.max(1, Math.ceil((T * start / 1000 - 1) / (1 - a) - 1e-9));
    if (m > 1000) m = null;
  }
  const mNeed = m === null ? null : need(m);
  const mAlpha = m === null ? null : (mNeed <= 1 ? 0 : alphaForAcceptLength(Math.min(mNeed, m + 1), m));
  return {max_draft_ms: spare >= 0 ? spare : null, min_steps: m, min_steps_accept_length: mNeed,
          min_steps_alpha: mAlpha};
}

// One scenario's numbers; `p` holds the controls' values (see CONTROLS, plus `unbounded` and `mode`).
export function compute(p) {
  const k = p.unbounded ? null : Math.round(p.steps);
  const anchor = k === null || !p.verify_steps ? k : Math.round(p.verify_steps);
  const draft = p.unbounded ? 0 : p.draft_ms;
  let growth = k === null ? 0 : (p.verify_growth_ms || 0), growthCapped = null;
  if (k !== null && anchor > 1 && growth > 0.9 * p.verify_ms / (anchor - 1)) {
    growthCapped = {asked: growth, used: 0.9 * p.verify_ms / (anchor - 1)};
    growth = growthCapped.used;
  }
  // the one verify model (eaglekit.core.serving.account.GrowingVerify): verify_ms measured at `anchor` steps,
  // growing `growth` ms per drafted token
  const verify = k === null ? p.verify_ms : p.verify_ms + (k - anchor) * growth;
  const fixed = verify + p.overhead_ms;
  const cycle = fixed + (k === null ? 0 : k * draft);
  let L, alpha, clamped = null;
  if (p.mode === "alpha") {
    alpha = p.alpha;
    L = expectedAcceptLength(alpha, k);
  } else {
    L = p.accept_length;
    if (k !== null && L > k + 1) {
      clamped = {asked: L, ceiling: k + 1};
      L = k + 1;
    }
    alpha = alphaForAcceptLength(L, k);
  }
  const tps = L * 1000 / cycle;
  const out = {
    verify_now_ms: verify, cycle_ms: cycle, accept_length: L, alpha: alpha, tokens_per_s: tps, speedup: tps / p.baseline_tps,
    break_even_accept_length: cycle * p.baseline_tps / 1000, clamped: clamped,
    target_accept_length: p.target_tps * cycle / 1000, target_alpha: null,
    target_max_draft_ms: null, target_min_steps: null, target_min_steps_accept_length: null,
    target_min_steps_alpha: null, growth_capped: growthCapped,
  };
  const need = out.target_accept_length;
  if (k === null || need <= k + 1 + 1e-9) {
    out.target_alpha = need <= 1 ? 0 : alphaForAcceptLength(k === null ? need : Math.min(need, k + 1), k);
  } else {
    const r = reach(p.target_tps, fixed, k, draft, growth);
    out.target_max_draft_ms = r.max_draft_ms;
    out.target_min_steps = r.min_steps;
    out.target_min_steps_accept_length = r.min_steps_accept_length;
    out.target_min_steps_alpha = r.min_steps_alpha;
  }
  return out;
}

const f2 = (x) => x.toFixed(2);
const pct = (x) => `${Math.round(x * 100)}%`;
const g = (x) => String(Number(x.toPrecision(6)));

function steps(p) {
  return p.unbounded ? "unbounded chain, drafting counted free"
                     : `k = ${Math.round(p.steps)} draft steps of ${f2(p.draft_ms)} ms`;
}

// The sentences shown beside the controls (the same wording as eaglekit.core.serving.account where they overlap).
export function describe(p, r) {
  const lines = [];
  const k = p.unbounded ? null : Math.round(p.steps);
  lines.push(["cycle", `${f2(r.cycle_ms)} ms = verify ${g(Number(r.verify_now_ms.toFixed(2)))}` +
    (k === null ? "" : ` + ${k} x draft ${f2(p.draft_ms)}`) + ` + overhead ${g(p.overhead_ms)} (${steps(p)})`]);
  if (k !== null && p.verify_growth_ms) {
    const gr = r.growth_capped ? r.growth_capped.used : p.verify_growth_ms;
    const at = p.verify_steps ? Math.round(p.verify_steps) : k;
    lines.push(["verify growth", `${f2(gr)} ms per drafted token away from the ${g(p.verify_ms)} ms measured at ` +
      `k = ${at} ` +
      "(a verify of more drafts reads more experts)" +
      (r.growth_capped ? `; ${f2(p.verify_growth_ms)} asked, capped so one draft's verify keeps a tenth of ` +
        `the verify at k = ${at}` : "")]);
  }
  lines.push(["accept length", `${f2(r.accept_length)} tokens per cycle (alpha ${r.alpha.toFixed(3)})`]);
  lines.push(["throughput", `${r.tokens_per_s.toFixed(1)} tok/s`]);
  const change = r.speedup - 1;
  lines.push(["speedup", `${f2(r.speedup)}x over ${g(p.baseline_tps)} tok/s baseline ` +
    `(${change >= 0 ? "+" : "-"}${pct(Math.abs(change))})`]);
  const be = r.break_even_accept_length;
  lines.push(["break-even", be < 1
    ? `accept length ${f2(be)}: below 1, so any drafter pays (every cycle emits at least the bonus token); ` +
      `a ${f2(r.cycle_ms)} ms cycle at ${g(p.baseline_tps)} tok/s is shorter than one baseline step: check the verify time`
    : `accept length ${f2(be)}`]);
  const T = g(p.target_tps), need = r.target_accept_length;
  if (need <= 1) lines.push(["target", `${T} tok/s is reached by any drafter: one token per cycle gives it`]);
  else if (r.target_alpha !== null) {
    lines.push(["target", `${T} tok/s needs accept length ${f2(need)} (alpha ${r.target_alpha.toFixed(3)})`]);
  } else {
    let s = `${T} tok/s is out of reach at k = ${k}: it needs accept length ${f2(need)}, ` +
      `at most ${k + 1} tokens per cycle give ${((k + 1) * 1000 / r.cycle_ms).toFixed(0)} tok/s.`;
    s += r.target_max_draft_ms === null ? ` No draft cost fixes that at k = ${k}.`
      : ` At k = ${k} a draft step would have to cost at most ${f2(r.target_max_draft_ms)} ms.`;
    const gr = r.growth_capped ? r.growth_capped.used : p.verify_growth_ms;
    const grows = gr ? ` and a verify growing ${f2(gr)} ms per drafted token` : "";
    s += r.target_min_steps === null ? ` No number of steps reaches it at ${f2(p.draft_ms)} ms per step${grows}.`
      : ` At ${f2(p.draft_ms)} ms per step${grows} it takes k = ${r.target_min_steps} and accept length ` +
        `${f2(r.target_min_steps_accept_length)} (alpha ${r.target_min_steps_alpha.toFixed(3)}).`;
    lines.push(["target", s]);
  }
  return lines;
}

// A control's value as its number box shows it: rounded to the control's step (1.6667 ms shows as 1.67).
function shown(value, step) {
  return String(Number(value.toFixed(Math.max(0, -Math.floor(Math.log10(step))))));
}

// el() and svg() come from dom.js, which eaglekit.view.frontend puts before this module.

function draw(chart, p, r) {
  const W = 760, H = 300, left = 56, right = 170, top = 16, bottom = 44;
  const k = p.unbounded ? null : Math.round(p.steps);
  const end = k === null ? Math.max(8, r.accept_length, r.target_alpha !== null ? need(r) : 1) : k + 1;
  const xMax = end + 0.5;
  const yMax = 1.15 * Math.max(p.baseline_tps, p.target_tps, end * 1000 / r.cycle_ms, r.tokens_per_s);
  const X = (x) => left + (x - 1) / (xMax - 1) * (W - left - right);
  const Y = (y) => H - bottom - y / yMax * (H - top - bottom);
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const axis = {stroke: "#888", "stroke-width": 1};
  chart.append(svg("line", {x1: X(1), y1: Y(0), x2: X(xMax), y2: Y(0), ...axis}),
               svg("line", {x1: X(1), y1: Y(0), x2: X(1), y2: Y(yMax), ...axis}));
  for (let x = 1; x <= xMax; x++) {
    chart.append(svg("text", {x: X(x), y: H - bottom + 16, "text-anchor": "middle", class: "tick"}, String(x)));
  }
  const raw = yMax / 6, unit = Math.pow(10, Math.floor(Math.log10(raw)));
  const yStep = unit * (raw / unit < 1.5 ? 1 : raw / unit < 3.5 ? 2 : raw / unit < 7.5 ? 5 : 10);
  for (let y = 0; y <= yMax; y += yStep) {
    chart.append(svg("text", {x: left - 6, y: Y(y) + 4, "text-anchor": "end", class: "tick"}, String(Math.round(y))));
  }
  chart.append(svg("text", {x: (left + W) / 2, y: H - 6, "text-anchor": "middle", class: "label"},
                   "accept length (tokens per cycle, bonus included)"),
               svg("text", {x: 12, y: (top + H - bottom) / 2, "text-anchor": "middle", class: "label",
                            transform: `rotate(-90 12 ${(top + H - bottom) / 2})`}, "tok/s"));
  const line = (x1, y1, x2, y2, cls) => chart.append(svg("line", {x1: X(x1), y1: Y(y1), x2: X(x2), y2: Y(y2), class: cls}));
  line(1, p.baseline_tps, xMax, p.baseline_tps, "baseline");
  line(1, p.target_tps, xMax, p.target_tps, "target");
  const be = r.break_even_accept_length;
  if (be >= 1 && be <= xMax) line(be, 0, be, p.baseline_tps, "breakeven");
  line(1, 1000 / r.cycle_ms, end, end * 1000 / r.cycle_ms, "chain");
  chart.append(svg("circle", {cx: X(r.accept_length), cy: Y(r.tokens_per_s), r: 7, class: "current"}));
  if (r.target_alpha !== null && need(r) >= 1) {
    const x = X(need(r)), y = Y(p.target_tps);
    chart.append(svg("path", {d: `M${x} ${y - 7}L${x + 7} ${y}L${x} ${y + 7}L${x - 7} ${y}Z`, class: "needed"}));
  }
  const legend = [["baseline", `baseline ${g(p.baseline_tps)} tok/s`], ["target", `target ${g(p.target_tps)} tok/s`],
                  ["breakeven", `break-even ${f2(be)}`], ["chain", k === null ? "unbounded chain" : `k = ${k}`]];
  legend.forEach(([cls, text], i) => {
    const y = top + 4 + i * 16, x = W - right + 14;  // beside the plot, clear of its lines
    chart.append(svg("line", {x1: x, y1: y, x2: x + 22, y2: y, class: cls}),
                 svg("text", {x: x + 28, y: y + 4, class: "tick"}, text));
  });
}

function need(r) { return Math.max(r.target_accept_length, 1); }

function params(model) {
  const p = {unbounded: !!model.get("unbounded"), mode: model.get("mode")};
  for (const [name] of CONTROLS) p[name] = Number(model.get(name));
  p.verify_steps = Number(model.get("verify_steps") || 0);
  return p;
}

function render({model, el: root}) {
  root.classList.add("eaglekit-calculator");
  const controls = el("div", {class: "controls"});
  let clamped = null;  // the last typed value that was out of its control's range, shown until the next change
  const mode = el("div", {class: "row mode"});
  for (const [value, label] of [["accept_length", "accept length"], ["alpha", "alpha"]]) {
    const b = el("button", {type: "button", "data-mode": value}, label);
    b.addEventListener("click", () => {
      // the other input takes the value that keeps the scenario where it is (accept length 2.0 at k = 2 is
      // alpha 0.618), not whatever it held before
      const p = params(model);
      if (value !== p.mode) {
        const r = compute(p);
        if (value === "alpha") model.set("alpha", Math.min(Math.max(r.alpha, 0), 0.99));
        else model.set("accept_length", r.accept_length);
      }
      model.set("mode", value); model.save_changes(); update();
    });
    mode.append(b);
  }
  const unbounded = el("input", {type: "checkbox", name: "unbounded"});
  unbounded.addEventListener("change", () => { model.set("unbounded", unbounded.checked); model.save_changes(); update(); });
  const unboundedRow = el("label", {class: "row check"});
  unboundedRow.append(unbounded, document.createTextNode(" unbounded chain (no k, drafting counted free)"));
  const inputs = numberControls(CONTROLS, controls, {
    format: shown,
    onClamp: (c) => { clamped = c; },
    set: (name, value) => {
      if (value !== null) { model.set(name, name === "steps" ? Math.round(value) : value); model.save_changes(); }
      update();
    },
    after: (name) => { if (name === "overhead_ms") controls.append(unboundedRow, mode); },
  });
  const side = el("div", {class: "side"});
  const note = el("p", {class: "note", role: "status"});
  const inputNote = el("p", {class: "input-note", role: "status"});
  const table = el("table", {class: "readout"});
  side.append(inputNote, note, table);
  const chart = svg("svg", {class: "chart", role: "img", "aria-label": "throughput against accept length"});
  const top = el("div", {class: "top"});
  top.append(controls, side);
  root.replaceChildren(top, chart);

  function update() {
    const p = params(model);
    for (const [name] of CONTROLS) {
      const off = p.unbounded && (name === "steps" || name === "draft_ms" || name === "verify_growth_ms");
      showControl(inputs[name], p[name], shown(p[name], inputs[name].step), off);
    }
    inputs.alpha.row.hidden = p.mode !== "alpha";
    inputs.accept_length.row.hidden = p.mode === "alpha";
    unbounded.checked = p.unbounded;
    for (const b of mode.querySelectorAll("button")) b.classList.toggle("active", b.dataset.mode === p.mode);
    const r = compute(p);
    note.textContent = r.clamped
      ? `Accept length ${f2(r.clamped.asked)} is above what k = ${Math.round(p.steps)} draft steps allow ` +
        `(${r.clamped.ceiling} tokens per cycle): computed at ${f2(r.accept_length)}. Raise k or tick "unbounded chain".`
      : "";
    note.hidden = !r.clamped;
    inputNote.textContent = clampNote(clamped);
    inputNote.hidden = !clamped;
    table.replaceChildren(...describe(p, r).map(([k, v]) => {
      const tr = el("tr", {"data-field": k});
      tr.append(el("th", {}, k), el("td", {}, v));
      return tr;
    }));
    draw(chart, p, r);
  }
  model.on("change", update);
  for (const [name] of [...CONTROLS, ["unbounded"], ["mode"]]) model.on(`change:${name}`, update);
  update();
}

export default { render };
