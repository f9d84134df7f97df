// eaglekit's serving-plan widget: the front end of eaglekit.view.serving.PlanWidget (an anywidget).
// Everything is computed here, in the browser, with the cost model of eaglekit.core.serving.costmodel and the plan of
// eaglekit.core.serving.plan, so the sliders work the same with a kernel (JupyterLab) and without one (the
// rendered report). eaglekit.view.serving.numbers is the Python twin of compute(); the browser tests compare them.

const CONTROLS = [
  // name, label, min, max, step
  ["batch_log2", "batch size (2^x)", 0, 12, 1],
  ["context", "context tokens", 0, 131072, 512],
  ["tp", "tensor-parallel GPUs", 1, 16, 1],
  ["hbm_tb_s", "HBM TB/s per GPU", 0.1, 10, 0.01],
  ["tflops", "dense TFLOP/s per GPU", 10, 5000, 1],
  ["fixed_ms", "fixed ms per forward", 0, 50, 0.01],
  ["mem", "memory-time factor", 0, 20, 0.001],
  ["compute", "compute-time factor", 0, 2000, 0.01],
  ["per_token_ms", "ms per verified token", 0, 50, 0.01],
  ["per_verify_ms", "ms per verify forward", 0, 50, 0.01],
  ["per_request_ms", "ms per request", 0, 5, 0.0001],
  ["draft_fixed_ms", "draft ms per step", 0, 20, 0.01],
  ["draft_per_request_ms", "draft ms per request", 0, 1, 0.0001],
  ["overhead_ms", "overhead ms per cycle", 0, 20, 0.01],
];

// eaglekit.core.serving.costmodel.distinct_experts
export function distinctExperts(rows, experts, perToken) {
  return experts <= 0 ? 0 : experts * (1 - Math.pow(1 - perToken / experts, rows));
}

// eaglekit.core.serving.costmodel.CostModel.ms
export function targetMs(p, batch, tokens) {
  const rows = batch * tokens;
  let m, c;
  if (p.generic) {
    m = 0; c = rows;
  } else {
    const weight = p.always_bytes + p.moe_layers * distinctExperts(rows, p.experts, p.experts_per_token) * p.expert_bytes;
    const kv = batch * p.context * p.kv_bytes_per_token;
    const kvGpu = p.kv_heads ? kv / Math.min(p.tp, Math.max(p.kv_heads, 1)) : kv;
    const gb = (weight / p.tp + kvGpu) / 1e9;
    const tflop = rows * (2 * p.active_params + p.context * p.attn_flops_per_context_token) / p.tp / 1e12;
    m = gb / p.hbm_tb_s;
    c = tflop * 1000 / p.tflops;
  }
  const excess = tokens > 1 ? (p.per_token_ms || 0) * (tokens - 1) + (p.per_verify_ms || 0) : 0;
  const extra = excess + (p.per_request_ms || 0) * batch;
  const terms = (p.combine === "max" ? p.fixed_ms + Math.max(p.mem * m, p.compute * c)
                                     : p.fixed_ms + p.mem * m + p.compute * c) + extra;
  const a = p.decode_offsets || [];
  const core = a.length ? Math.max(terms + offsetMs(a, batch), 0.5 * terms) : terms;
  if (tokens <= 1) return core;
  // a verify costs no more than a decode step of batch x tokens requests plus the excess the measured verifies
  // show (at the most tokens a verify was measured at, where tokens is past them: the line is not carried further)
  const top = p.carry_excess ? 0 : (p.verify_tokens_measured || 0);
  const n = top ? Math.min(tokens, top) : tokens;
  const seen = n > 1 ? (p.per_token_ms || 0) * (n - 1) + (p.per_verify_ms || 0) : 0;
  return Math.min(core, targetMs(p, Math.min(batch * tokens, 1 << 24), 1) + seen);
}

// eaglekit.core.serving.costmodel.CostModel.offset_ms: measured decodes' offsets, linear in log batch size between
// them, held past them
function offsetMs(a, batch) {
  if (batch <= a[0][0]) return a[0][1];
  for (let i = 1; i < a.length; i++) {
    const [b0, r0] = a[i - 1], [b1, r1] = a[i];
    if (batch <= b1) return r0 + Math.log(batch / b0) / Math.log(b1 / b0) * (r1 - r0);
  }
  return a[a.length - 1][1];
}

// eaglekit.core.serving.plan.accept_length
export function acceptLength(perStep, k) {
  let total = 1, run = 1;
  for (let j = 0; j < k; j++) {
    run *= perStep[Math.min(j, perStep.length - 1)];
    total += run;
  }
  return total;
}

// eaglekit.core.serving.plan.best_steps: the highest throughput; one within 1% with fewer steps wins
function bestSteps(tps) {
  let top = 0;
  for (let k = 0; k < tps.length; k++) if (tps[k] > tps[top]) top = k;
  for (let k = 0; k <= top; k++) if (tps[k] >= tps[top] * (1 - 0.01)) return k;
  return top;
}

function options(p, batch) {
  const draft = p.draft_free ? 0 : p.draft_fixed_ms + p.draft_per_request_ms * batch;
  const overhead = p.draft_free ? 0 : (p.overhead_ms || 0);
  const out = [];
  let base = 0;
  for (let k = 0; k <= p.max_steps; k++) {
    const verify = targetMs(p, batch, k + 1);
    // a measured run's cell as measured (eaglekit.core.serving.grid: its accept length and cycle)
    const run = (p.measured_cells || []).find((c) => c[0] === batch && c[1] === k);
    const L = run ? run[2] : acceptLength(p.per_step, k);
    const cycle = run ? run[3] : verify + k * draft + (k ? overhead : 0);
    const perRequest = L * 1000 / cycle;
    const total = batch * perRequest;
    if (k === 0) base = total;
    out.push({steps: k, accept_length: L, verify_ms: verify, draft_ms: k ? draft : 0, cycle_ms: cycle,
              per_request_tokens_per_s: perRequest, tokens_per_s: total, speedup: total / base});
  }
  return out;
}

// eaglekit.core.serving.capacity.Capacity.fits at the control's context (no memory figure: everything fits)
export function fits(p, b) {
  return !(p.cap_usable_gb > 0) || p.cap_weights_gb + b * p.cap_kv_gb_per_token * p.context <= p.cap_usable_gb;
}

// The largest batch size that fits (null: no memory figure; 0: not even the weights)
function largestBatch(p) {
  if (!(p.cap_usable_gb > 0)) return null;
  if (p.cap_weights_gb > p.cap_usable_gb) return 0;
  const kv = p.cap_kv_gb_per_token * p.context;
  return kv > 0 ? Math.floor((p.cap_usable_gb - p.cap_weights_gb) / kv + 1e-9) : null;
}

// The plan at the chosen batch size, and the schedule over the planned batch sizes.
export function compute(p) {
  const batch = Math.pow(2, Math.round(p.batch_log2));
  const opts = options(p, batch);
  const best = bestSteps(opts.map((o) => o.tokens_per_s));
  const schedule = [];
  let stops = null;
  const planned = p.batches.filter((b) => fits(p, b));
  for (const b of planned) {
    const o = options(p, b);
    const k = bestSteps(o.map((x) => x.tokens_per_s));
    if (k !== 0) stops = null;            // paying again: speculation has not stopped paying
    else if (stops === null) stops = b;   // the first of a run of k = 0 that lasts to the largest size
    const last = schedule[schedule.length - 1];
    if (last && last[2] === k) last[1] = b;
    else schedule.push([schedule.length ? b : 1, b, k]);
  }
  const experts = [];
  for (let k = 0; k <= p.max_steps; k++) {
    experts.push(p.generic ? null : distinctExperts(batch * (k + 1), p.experts, p.experts_per_token));
  }
  return {batch, options: opts, best_steps: best, schedule, stops_paying_at: stops,
          fits: fits(p, batch), distinct_experts: experts};
}

const f = (x, d) => x.toFixed(d);

// el() and svg() come from dom.js, which eaglekit.view.frontend puts before this module.

function draw(chart, r) {
  const W = 640, H = 220, left = 56, right = 16, top = 12, bottom = 40;
  const n = r.options.length, yMax = 1.15 * Math.max(...r.options.map((o) => o.tokens_per_s));
  const bw = (W - left - right) / n;
  const Y = (y) => H - bottom - y / yMax * (H - top - bottom);
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  r.options.forEach((o, k) => {
    const x = left + k * bw + 4;
    chart.append(svg("rect", {x, y: Y(o.tokens_per_s), width: bw - 8, height: Y(0) - Y(o.tokens_per_s),
                              class: k === r.best_steps ? "bar best" : "bar"}),
                 svg("text", {x: x + (bw - 8) / 2, y: H - bottom + 16, "text-anchor": "middle", class: "tick"}, String(k)),
                 svg("text", {x: x + (bw - 8) / 2, y: Y(o.tokens_per_s) - 3, "text-anchor": "middle", class: "tick"},
                     f(o.tokens_per_s, 0)));
  });
  chart.append(svg("text", {x: (left + W) / 2, y: H - 4, "text-anchor": "middle", class: "label"},
                   `draft steps k at batch ${r.batch} (bars: tok/s, all requests)`));
}

// A control's value in its box: rounded to the control's step (a box 80 px wide cannot show 11.151062)
function shownValue(x, step) {
  const digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step) - 1e-9)));
  return String(Number(Number(x).toFixed(digits)));
}

function params(model) {
  const p = {};
  for (const name of ["experts", "experts_per_token", "moe_layers", "expert_bytes", "always_bytes", "active_params",
                      "kv_bytes_per_token", "kv_heads", "attn_flops_per_context_token", "max_steps",
                      "cap_usable_gb", "cap_weights_gb", "cap_kv_gb_per_token"]) {
    p[name] = Number(model.get(name));
  }
  for (const [name] of CONTROLS) p[name] = Number(model.get(name));
  p.generic = !!model.get("generic");
  p.draft_free = !!model.get("draft_free");
  p.carry_excess = !!model.get("carry_excess");
  p.verify_tokens_measured = Number(model.get("verify_tokens_measured") || 0);
  p.combine = model.get("combine");
  p.per_step = model.get("per_step").map(Number);
  p.batches = model.get("batches").map(Number);
  p.decode_offsets = (model.get("decode_offsets") || []).map((a) => a.map(Number));
  p.measured_cells = (model.get("measured_cells") || []).map((a) => a.map(Number));
  return p;
}

// Whether the controls still hold the plan's own inputs (the batch size aside): then the plan's choices, which
// weigh its 95% intervals, apply to what the widget shows
function pristine(p, start) {
  return CONTROLS.every(([name]) => name === "batch_log2" || p[name] === start[name]);
}

// What the plan chose at this batch size, beside the point values' best k (only while the controls are the plan's)
function planWords(p, start, r, choices) {
  if (!pristine(p, start)) return " Point values for these inputs (the plan's intervals and choices are for its own).";
  const c = choices.find((x) => Number(x[0]) === r.batch);
  if (!c) return "";
  const [, k, verdict, also] = c;
  const within = also.length ? `; k = ${also.join(", ")} within its 95% interval` : "";
  if (Number(k) === r.best_steps) return ` The plan: k = ${k} (${verdict}${within}).`;
  if (Number(k) < r.best_steps) {
    return ` The plan chooses k = ${k} here (${verdict}${within}): ties within the intervals go to fewer steps, ` +
      `so the schedule does not climb on a difference the figures cannot tell from noise.`;
  }
  return ` The plan chooses k = ${k} here (${verdict}${within}): its choice weighs the 95% intervals and the ` +
    `schedule across batch sizes, which these point values alone do not.`;
}

function render({model, el: root}) {
  root.classList.add("eaglekit-serving");
  const controls = el("div", {class: "controls"});
  let clamped = null;  // the last typed value that was out of its control's range, shown until the next change
  const inputs = numberControls(CONTROLS, controls, {
    onClamp: (c) => { clamped = c; },
    set: (name, value) => {
      if (value !== null) { model.set(name, value); model.save_changes(); }
      update();
    },
  });
  const side = el("div", {class: "side"});
  const inputNote = el("p", {class: "input-note", role: "status"});
  const summary = el("p", {class: "summary", role: "status"});
  const table = el("table", {class: "readout"});
  side.append(inputNote, summary, table);
  const chart = svg("svg", {class: "chart", role: "img", "aria-label": "tokens per second by draft steps"});
  const top = el("div", {class: "top"});
  top.append(controls, side);
  root.replaceChildren(top, chart);
  const start = params(model);  // the plan's inputs, as the widget was created
  const choices = model.get("plan_choice") || [];
  const planSchedule = model.get("plan_schedule") || null;

  function update() {
    const p = params(model);
    if (!pristine(p, start)) p.measured_cells = [];  // measured for the plan's inputs, not for these
    for (const [name, , , , step] of CONTROLS) {
      const off = (p.generic && ["context", "tp", "hbm_tb_s", "tflops", "mem"].includes(name))
        || (p.draft_free && (name.startsWith("draft") || name === "overhead_ms"));
      showControl(inputs[name], p[name], shownValue(p[name], step), off);
    }
    inputNote.textContent = clampNote(clamped);
    inputNote.hidden = !clamped;
    const r = compute(p);
    const b = r.options[r.best_steps];
    const sched = "{" + r.schedule.map(([lo, hi, k]) => `"${lo}-${hi}": ${k}`).join(", ") + "}";
    const planned = p.batches.filter((x) => fits(p, x));
    const here = !r.fits ? `Batch ${r.batch} does not fit in memory (at most ${largestBatch(p)} requests at ` +
        `${p.context} tokens): these figures are what it would give with more memory. `
      : r.best_steps === 0 ? `Batch ${r.batch}: speculation does not pay here (best k = 0, ` +
        `${f(b.tokens_per_s, 0)} tok/s). `
      : `Batch ${r.batch}: best k = ${r.best_steps}, ${f(b.tokens_per_s, 0)} tok/s (${f(b.speedup, 2)}x no ` +
        `speculation). `;
    const range = planned.length ? `${planned[0]}-${planned[planned.length - 1]}` : "none";
    // while the controls hold the plan's inputs, its schedule (which weighs the intervals) is the one shown
    const own = planSchedule && pristine(p, start);
    const ks = own ? Object.values(planSchedule).map(Number) : r.schedule.map((s) => s[2]);
    const stops = own ? (model.get("plan_stops_paying_at") ?? null) : r.stops_paying_at;
    const theirs = own ? "{" + Object.entries(planSchedule).map(([key, k]) => `"${key}": ${k}`).join(", ") + "}" : sched;
    const schedWords = theirs !== sched
      ? `vLLM schedule over the planned batch sizes (${range}): the plan's ${theirs} (by point values alone ${sched}); `
      : `vLLM schedule over the planned batch sizes (${range}) ${sched}; `;
    summary.textContent = here + schedWords +
      (!planned.length ? "no planned batch size fits."
        : stops === null && ks.every((k) => k > 0)
          ? `speculation pays at every planned batch size (${range}).`
        : stops === null ? "speculation pays where the schedule's k is above 0, the largest planned " +
          "batch size included."
        : `speculation stops paying at batch ${stops}.`) +
      (p.draft_free ? " Drafting counted free." : "") + (r.fits ? planWords(p, start, r, choices) : "");
    const head = el("tr");
    for (const h of ["k", "experts/layer", "accept length", "target ms", "cycle ms", "tok/s", "per request", "speedup"]) {
      head.append(el("th", {}, h));
    }
    table.replaceChildren(head, ...r.options.map((o, k) => {
      const tr = el("tr", {class: k === r.best_steps ? "best" : "", "data-steps": String(k)});
      const e = r.distinct_experts[k];
      for (const v of [String(k), e === null ? "-" : f(e, 1), f(o.accept_length, 2), f(o.verify_ms, 2),
                       f(o.cycle_ms, 2), f(o.tokens_per_s, 0), f(o.per_request_tokens_per_s, 1), `${f(o.speedup, 2)}x`]) {
        tr.append(el("td", {}, v));
      }
      return tr;
    }));
    draw(chart, r);
  }
  model.on("change", update);
  for (const [name] of CONTROLS) model.on(`change:${name}`, update);
  update();
}

export default { render };
