// DOM helpers shared by eaglekit's widget front ends (calculator.js, serving.js): eaglekit.view.frontend
// puts this file before each of them, so the two widgets build their elements the same way.

function el(tag, attrs = {}, text = null) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text = null) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

const g6 = (x) => String(Number(x.toPrecision(6)));

// One parameter's slider and number box. A typed value commits on change and on Enter (JupyterLab takes Enter
// for its notebook commands before a change event fires); one outside [min, max] is clamped, shown clamped in
// the box, and reported through onClamp({label, asked, kept, min, max}); moving the slider clears the report
// (onClamp(null)). onSet(value) gets the value to store, or null when the box holds no number (redraw only).
function numberControl({name, label, min, max, step, format = (x) => String(x), onSet, onClamp = () => {}}) {
  const row = el("label", {class: "row", "data-name": name});
  const range = el("input", {type: "range", min, max, step, name});
  const number = el("input", {type: "number", min, max, step, name: `${name}-value`});
  range.addEventListener("input", () => { onClamp(null); onSet(Number(range.value)); });
  const commit = () => {
    const v = Number(number.value);
    if (number.value.trim() === "" || !Number.isFinite(v)) { onSet(null); return; }  // not a number: show the value again
    const kept = Math.min(max, Math.max(min, v));
    onClamp(kept === v ? null : {label, asked: v, kept, min, max});
    if (kept !== v) number.value = format(kept, step);  // the box keeps focus: show the clamped value here
    onSet(kept);
  };
  number.addEventListener("change", commit);
  number.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
    event.stopPropagation();
    commit();
  });
  row.append(el("span", {class: "name"}, label), range, number);
  return {row, range, number, step};
}

// One numberControl per [name, label, min, max, step] spec, appended to `container` (then `after(name)`, for rows
// that follow one); `set(name, value)` gets what onSet gets. Returns the controls by name.
function numberControls(specs, container, {set, format, onClamp, after = () => {}}) {
  const inputs = {};
  for (const [name, label, min, max, step] of specs) {
    const control = numberControl({name, label, min, max, step, format, onClamp, onSet: (value) => set(name, value)});
    inputs[name] = control;
    container.append(control.row);
    after(name);
  }
  return inputs;
}

// Show `value` in a control's slider and `shown` in its box (neither while the reader is using it), and grey
// the control out when `off`.
function showControl({range, number, row}, value, shown, off) {
  if (document.activeElement !== range) range.value = value;
  if (document.activeElement !== number) number.value = shown;
  row.classList.toggle("disabled", off);
  range.disabled = number.disabled = off;
}

// The sentence that reports a clamped typed value (empty when there is none).
function clampNote(clamped) {
  return clamped ? `${clamped.label} ${g6(clamped.asked)} is outside this control's range (${g6(clamped.min)} to ` +
    `${g6(clamped.max)}): set to ${g6(clamped.kept)}.` : "";
}
