// The source pane's looks: CodeMirror's chrome and the colours of the Markdown tokens, one for a
// light page and one for a dark one. editor.js holds them in a Compartment and swaps them as
// `prefers-color-scheme` changes (the same media query page.css and editor.css follow).
//
// Every token colour meets WCAG AA (4.5:1) on every ground text is drawn on in its look: the
// pane, the pane of a read-only page, the active line over either, the selection (focused or
// not) and another person's selection (editor.css mixes 22% of their colour into the ground).
// test/theme.test.mjs works the ratios out from the values below and editor.css.
//
// The light look is CodeMirror's own (its base theme and default highlight style), but for the
// escape, comment and invalid colours, darker than the defaults #e40, #940 and #f00 (3.8:1 and
// 4:1 on white, the comment 4.5:1 only off another person's selection).

import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { EditorView } from "@codemirror/view";
import { tags as t } from "@lezer/highlight";

/** The light look's grounds: CodeMirror's base theme, and editor.css's read-only pane. */
export const LIGHT = {
  ground: "#ffffff",
  readonly: "#f6f8fa",
  text: "#000000",
  activeLine: "#cceeff44",
  selection: "#d7d4f0",
  selectionBlurred: "#d9d9d9",
  colours: {
    meta: "#404740",
    url: "#221199",
    string: "#aa1111",
    escape: "#9a3300",
    comment: "#8a3d00",
    keyword: "#770088",
    invalid: "#b00000",
  },
};

/** The dark look. The ground is a step above page.css's dark page (#14181d), so the pane shows. */
export const DARK = {
  ground: "#1a1f26",
  readonly: "#20262e",
  text: "#e6e9ed",
  cursor: "#e6e9ed",
  activeLine: "#ffffff0a",
  selection: "#2c3e57",
  selectionBlurred: "#2a3139",
  gutter: "#b6bfc9",
  colours: {
    mark: "#b6bfc9",
    heading: "#9ccaff",
    link: "#99befa",
    url: "#7fd4c8",
    label: "#d4b4ff",
    string: "#f5b98a",
    code: "#f0c674",
    quote: "#b7c1cb",
    escape: "#ffab8f",
    comment: "#97c98a",
    invalid: "#ffaaa0",
  },
};

const light = LIGHT.colours;

/** CodeMirror's defaultHighlightStyle for what the Markdown grammar marks, escape darkened. */
export const lightHighlight = HighlightStyle.define([
  { tag: t.meta, color: light.meta },
  { tag: t.link, textDecoration: "underline" },
  { tag: t.heading, textDecoration: "underline", fontWeight: "bold" },
  { tag: t.emphasis, fontStyle: "italic" },
  { tag: t.strong, fontWeight: "bold" },
  { tag: t.strikethrough, textDecoration: "line-through" },
  { tag: t.keyword, color: light.keyword },
  { tag: [t.atom, t.bool, t.url, t.contentSeparator, t.labelName], color: light.url },
  { tag: [t.string, t.deleted], color: light.string },
  { tag: [t.regexp, t.escape, t.special(t.string)], color: light.escape },
  { tag: t.comment, color: light.comment },
  { tag: t.invalid, color: light.invalid },
]);

const dark = DARK.colours;

/** The Markdown tokens on the dark ground: marks (#, *, `, >, list marks, link brackets) muted,
    the words they mark coloured by what they are. */
export const darkHighlight = HighlightStyle.define(
  [
    { tag: [t.meta, t.processingInstruction, t.contentSeparator], color: dark.mark },
    { tag: t.heading, fontWeight: "bold", color: dark.heading },
    { tag: t.emphasis, fontStyle: "italic" },
    { tag: t.strong, fontWeight: "bold" },
    { tag: t.strikethrough, textDecoration: "line-through" },
    { tag: t.link, textDecoration: "underline", color: dark.link },
    { tag: t.url, color: dark.url },
    { tag: [t.labelName, t.atom, t.bool], color: dark.label },
    { tag: [t.string, t.deleted], color: dark.string },
    { tag: t.monospace, color: dark.code },
    { tag: t.quote, fontStyle: "italic", color: dark.quote },
    { tag: [t.escape, t.character, t.regexp, t.special(t.string)], color: dark.escape },
    { tag: t.comment, color: dark.comment },
    { tag: t.invalid, color: dark.invalid },
  ],
  { themeType: "dark" },
);

/** The light chrome: CodeMirror's base theme, but for a special character's placeholder in a
    darker red than its #f00 (4:1 on white). */
export const lightTheme = EditorView.theme({ ".cm-specialChar": { color: light.invalid } }, { dark: false });

/** The dark chrome. The selectors are those of CodeMirror's base theme, so these win over it. */
export const darkTheme = EditorView.theme(
  {
    "&": { color: DARK.text, backgroundColor: DARK.ground },
    ".editor-readonly &": { backgroundColor: DARK.readonly },
    ".cm-content": { caretColor: DARK.cursor },
    ".cm-cursor, .cm-dropCursor": { borderLeftColor: DARK.cursor },
    ".cm-selectionBackground, .cm-content ::selection": { backgroundColor: DARK.selectionBlurred },
    "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground": {
      backgroundColor: DARK.selection,
    },
    "&.cm-focused .cm-content ::selection": { backgroundColor: DARK.selection },
    ".cm-activeLine": { backgroundColor: DARK.activeLine },
    ".cm-gutters": { backgroundColor: DARK.ground, color: DARK.gutter, border: "none" },
    ".cm-activeLineGutter": { backgroundColor: DARK.activeLine },
    ".cm-specialChar": { color: dark.escape },
  },
  { dark: true },
);

/** The look for a dark page (`dark` true) or a light one: chrome and highlighting. */
export function look(dark) {
  return dark
    ? [darkTheme, syntaxHighlighting(darkHighlight)]
    : [lightTheme, syntaxHighlighting(lightHighlight)];
}
