// Colour arithmetic for the accessibility checks of the page's colours: WCAG 2 contrast, and how far apart two
// colours look (CIE76 ΔE in CIELAB) to normal vision and under simulated colour-vision deficiencies (Machado,
// Oliveira and Fernandes 2009, severity 1: full protanopia, deuteranopia and tritanopia).

// CSS 'rgb(r, g, b)' / 'rgba(r, g, b, a)' (what getComputedStyle returns) or '#rrggbb' -> [r, g, b] in 0..255.
export function parseColour(css) {
  const hex = /^#([\da-f]{2})([\da-f]{2})([\da-f]{2})$/i.exec(css);
  if (hex) return hex.slice(1).map((part) => parseInt(part, 16));
  const rgb = /^rgba?\((\d+(?:\.\d+)?),? (\d+(?:\.\d+)?),? (\d+(?:\.\d+)?)/.exec(css);
  if (!rgb) throw new Error(`colours.js: not an rgb() or #rrggbb colour: ${css}`);
  return rgb.slice(1, 4).map(Number);
}

const toLinear = (channel) => {
  const value = channel / 255;
  return value <= 0.04045 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4;
};

function relativeLuminance(rgb) {
  const [r, g, b] = rgb.map(toLinear);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

// WCAG 2 contrast ratio of two colours, 1 to 21.
export function contrastRatio(first, second) {
  const [lighter, darker] = [relativeLuminance(first), relativeLuminance(second)].sort((a, b) => b - a);
  return (lighter + 0.05) / (darker + 0.05);
}

// Linear-RGB matrices that map a colour to what a dichromat sees.
export const COLOUR_VISION = {
  normal: [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
  protanopia: [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
  deuteranopia: [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
  tritanopia: [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
};

function linearToLab([r, g, b]) {
  const x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
  const y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
  const f = (t) => (t > (6 / 29) ** 3 ? Math.cbrt(t) : t / (3 * (6 / 29) ** 2) + 4 / 29);
  return [116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))];
}

// CIE76 ΔE between two colours as seen with the given colour vision (a key of COLOUR_VISION); about 2.3 is just
// noticeable, above 10 two colours read as clearly different.
export function perceivedDifference(first, second, vision = 'normal') {
  const matrix = COLOUR_VISION[vision];
  const seen = (rgb) => {
    const linear = rgb.map(toLinear);
    return linearToLab(matrix.map((row) => Math.min(1, Math.max(0, row[0] * linear[0] + row[1] * linear[1] + row[2] * linear[2]))));
  };
  const [a, b] = [seen(first), seen(second)];
  return Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}
