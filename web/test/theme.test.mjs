// The source pane's light and dark looks (src/lib/theme.js) and the dark preview (src/editor.css):
// every text colour meets WCAG AA (4.5:1) on every ground it is drawn on, the contrast worked out
// here from the colours themselves: the pane, a read-only page's pane, the active line over
// either, the selection focused and not, and another person's selection (each palette colour of
// editor.css mixed into the ground as editor.css mixes it). The dark look colours every Markdown
// token the grammar marks, and editor.css's dark grounds are the theme's.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { markdownLanguage } from "@codemirror/lang-markdown";
import { highlightTree, tags as t } from "@lezer/highlight";

import { DARK, LIGHT, darkHighlight, lightHighlight } from "../src/lib/theme.js";

const css = readFileSync(new URL("../src/editor.css", import.meta.url), "utf8");
const pageCss = readFileSync(
  new URL("../../crates/fermata-http/src/view/page.css", import.meta.url),
  "utf8",
);

/** editor.css before its first dark block, and that block (up to the outline's rules). */
const darkAt = css.indexOf("@media (prefers-color-scheme: dark)");
const lightCss = css.slice(0, darkAt);
const darkCss = css.slice(darkAt, css.indexOf("/* The outline"));

/** The channels of `#rgb`, `#rrggbb` or `#rrggbbaa`, 0 to 1, alpha last. */
function channels(hex) {
  const digits = hex.slice(1);
  const full = digits.length === 3 ? [...digits].map((c) => c + c).join("") : digits;
  const values = [0, 2, 4, 6].map((at) => (at < full.length ? parseInt(full.slice(at, at + 2), 16) / 255 : 1));
  return values;
}

function hex(values) {
  return `#${values
    .slice(0, 3)
    .map((v) => Math.round(v * 255).toString(16).padStart(2, "0"))
    .join("")}`;
}

/** `colour` drawn over the opaque `ground`, with `alpha` (or the colour's own) as its cover. */
function over(colour, ground, alpha) {
  const top = channels(colour);
  const cover = alpha === undefined ? top[3] : alpha;
  const under = channels(ground);
  return hex([0, 1, 2].map((i) => top[i] * cover + under[i] * (1 - cover)));
}

function luminance(colour) {
  const [r, g, b] = channels(colour)
    .slice(0, 3)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG's contrast ratio of two opaque colours. */
function contrast(a, b) {
  const [high, low] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (high + 0.05) / (low + 0.05);
}

/** The palette's light and dark values, from editor.css's `.presence-N` rules. */
function palette() {
  return [...css.matchAll(/\.presence-(\d+)\s*\{([^}]*)\}/g)].map(([, , body]) => {
    const value = (name) => new RegExp(`--presence-${name}:\\s*(#[0-9a-fA-F]{6})`).exec(body)[1];
    return { light: value("light"), dark: value("dark") };
  });
}

/** How much of a person's colour editor.css mixes into the ground under their selection. */
function remoteShare() {
  const found = /\.editor-remote-selection\s*\{[^}]*color-mix\(in srgb, var\(--presence\) (\d+)%, transparent\)/.exec(css);
  return Number(found[1]) / 100;
}

/** The value of `property` in the rule of `selector` (exactly as written) in `sheet`. */
function declared(sheet, selector, property) {
  const escaped = selector.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\s+/g, "\\s+");
  const rule = new RegExp(`(?:^|[}\\s])${escaped}\\s*\\{([^}]*)\\}`).exec(sheet);
  assert.ok(rule, `no rule ${selector}`);
  const value = new RegExp(`(?:^|[;\\s])${property}:\\s*([^;]+);`).exec(rule[1]);
  assert.ok(value, `no ${property} in ${selector}`);
  return value[1].trim();
}

/** page.css's value of the custom property `name`, in the light or the dark set. */
function pageColour(name, scheme) {
  const at = pageCss.indexOf("prefers-color-scheme:dark");
  const part = scheme === "dark" ? pageCss.slice(at) : pageCss.slice(0, at);
  return new RegExp(`--${name}:\\s*(#[0-9a-fA-F]{3,6})`).exec(part)[1];
}

/** The colours a highlight style draws text in. */
function tokenColours(style) {
  return [...new Set(style.specs.filter((spec) => spec.color).map((spec) => spec.color))];
}

/** Every ground the source's text is drawn on in a look, by name. */
function grounds(look, scheme) {
  const found = {
    pane: look.ground,
    "read-only pane": look.readonly,
    "active line": over(look.activeLine, look.ground),
    "active line, read-only": over(look.activeLine, look.readonly),
    selection: look.selection,
    "selection, unfocused": look.selectionBlurred,
  };
  const share = remoteShare();
  palette().forEach((colours, index) => {
    found[`presence-${index}'s selection`] = over(colours[scheme], look.ground, share);
    found[`presence-${index}'s selection, read-only`] = over(colours[scheme], look.readonly, share);
  });
  return found;
}

/** Asserts every colour of `texts` has 4.5:1 on every ground; returns the lowest ratio of each. */
function assertReadable(texts, on, what) {
  const lowest = {};
  for (const [name, text] of Object.entries(texts)) {
    for (const [place, ground] of Object.entries(on)) {
      const ratio = contrast(text, ground);
      assert.ok(ratio >= 4.5, `${what}: ${name} ${text} on the ${place} ${ground}: ${ratio.toFixed(2)} < 4.5`);
      if (!(name in lowest) || ratio < lowest[name].ratio) lowest[name] = { ratio, place };
    }
  }
  return lowest;
}

function report(context, lowest) {
  for (const [name, { ratio, place }] of Object.entries(lowest)) {
    context.diagnostic(`${name}: at least ${ratio.toFixed(2)}:1 (lowest on the ${place})`);
  }
}

test("every text of the dark source meets WCAG AA on each of its grounds", (context) => {
  // Every colour the highlight style draws in is one of the named ones checked here.
  assert.deepEqual(tokenColours(darkHighlight).filter((c) => !Object.values(DARK.colours).includes(c)), []);
  const texts = { text: DARK.text, gutter: DARK.gutter, ...DARK.colours };
  const on = grounds(DARK, "dark");
  report(context, assertReadable(texts, on, "dark"));
  // The cursor is no text, but is seen: 3:1 on the pane and the active line.
  for (const ground of [DARK.ground, DARK.readonly, on["active line"], on["active line, read-only"]]) {
    assert.ok(contrast(DARK.cursor, ground) >= 3);
  }
  assert.equal(darkHighlight.themeType, "dark");
});

test("every text of the light source meets WCAG AA on each of its grounds", (context) => {
  assert.deepEqual(tokenColours(lightHighlight).filter((c) => !Object.values(LIGHT.colours).includes(c)), []);
  const texts = { text: LIGHT.text, ...LIGHT.colours };
  report(context, assertReadable(texts, grounds(LIGHT, "light"), "light"));
});

test("editor.css's grounds are the theme's", () => {
  assert.equal(declared(lightCss, ".editor-readonly .editor-source", "background"), LIGHT.readonly);
  assert.equal(declared(darkCss, ".editor-preview", "background"), DARK.ground);
  assert.equal(declared(darkCss, ".editor-readonly .editor-source", "background"), DARK.readonly);
  // The source's dark text is page.css's.
  assert.equal(pageColour("text", "dark"), DARK.text);
  // Nothing keeps the source's collaborators in their light colours in the dark any more.
  assert.doesNotMatch(darkCss + css.slice(css.lastIndexOf("@media (prefers-color-scheme: dark)")), /\.editor-source \.presence/);
});

test("every text of the dark preview meets WCAG AA on its ground", (context) => {
  const ground = declared(darkCss, ".editor-preview", "background");
  const dark = (name) => pageColour(name, "dark");
  const lowest = {};
  const check = (texts, on) => Object.assign(lowest, assertReadable(texts, on, "dark preview"));
  check({ text: dark("text"), link: dark("link"), visited: dark("visited"), muted: dark("muted") }, { preview: ground });
  check({ "code text": dark("text") }, { "code block": declared(darkCss, ".editor-preview-body pre", "background") });
  check(
    { "MDX shown as code": declared(darkCss, ".editor-preview-body .preview-mdx", "color") },
    { "MDX block": declared(darkCss, ".editor-preview-body .preview-mdx", "background") },
  );
  assert.equal(declared(darkCss, ".editor-preview-body blockquote", "color"), "var(--muted)");
  report(context, lowest);
});

test("the dark look colours each Markdown token the grammar marks", () => {
  const sample = [
    "# Heading",
    "",
    "Some *emphasis*, **strong**, ~~gone~~, `code`, \\* and &amp; [a link](https://example.com \"title\").",
    "",
    "> A quote",
    "",
    "- a list",
    "- [x] a task",
    "",
    "1. ordered",
    "",
    "```js",
    "fenced();",
    "```",
    "",
    "<Chart data={[1, 2]} />",
    "",
    "<!-- a comment -->",
    "",
    "---",
    "",
  ].join("\n");
  const tree = markdownLanguage.parser.parse(sample);
  const styled = new Map();
  highlightTree(tree, darkHighlight, (from, to, classes) => {
    styled.set(sample.slice(from, to).trim(), classes);
  });
  const colourOf = (tag) => {
    const spec = darkHighlight.specs.find((s) => (Array.isArray(s.tag) ? s.tag : [s.tag]).includes(tag) && s.color);
    return spec && spec.color;
  };
  // Each mark and each kind of word takes a colour of the dark palette, not the text's.
  for (const [text, tag] of [
    ["#", t.processingInstruction],
    ["Heading", t.heading],
    ["`", t.processingInstruction],
    ["https://example.com", t.url],
    ["\"title\"", t.string],
    ["\\*", t.escape],
    ["&amp;", t.character],
    ["js", t.labelName],
    ["-", t.processingInstruction],
    ["<!-- a comment -->", t.comment],
    ["---", t.contentSeparator],
    ["[x]", t.atom],
  ]) {
    assert.ok(styled.has(text), `${text} is not highlighted: ${[...styled.keys()].join(" | ")}`);
    assert.ok(colourOf(tag), `no colour for ${text}`);
  }
  for (const tag of [t.heading, t.link, t.url, t.monospace, t.quote, t.processingInstruction, t.labelName]) {
    assert.ok(colourOf(tag), `the dark look has no colour of its own for ${tag}`);
  }
  // Emphasis and strong are drawn in their own type, and inline code, links and quotes styled.
  for (const text of ["emphasis", "strong", "code", "a link", "A quote", "gone"]) {
    assert.ok(
      [...styled.keys()].some((key) => key.includes(text)),
      `${text} is not highlighted: ${[...styled.keys()].join(" | ")}`,
    );
  }
});
