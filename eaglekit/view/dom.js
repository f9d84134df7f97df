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
