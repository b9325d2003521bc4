// The headings src/lib/outline.js lists: ATX headings of the Markdown source, as CommonMark reads
// them, with those inside fenced code blocks and front matter left out, each with the offset of
// its line in the text.

import assert from "node:assert/strict";
import { test } from "node:test";

import { headings } from "../src/lib/outline.js";

/** The headings as `level text` lines. */
const shown = (text) => headings(text).map((h) => `${h.level} ${h.text}`);

test("each level from # to ###### is a heading, with its line's offset", () => {
  const text = "# One\nbody\n## Two\n### Three\n#### Four\n##### Five\n###### Six\n####### Seven\n";
  assert.deepEqual(shown(text), ["1 One", "2 Two", "3 Three", "4 Four", "5 Five", "6 Six"]);
  const found = headings(text);
  for (const heading of found) {
    assert.ok(text.slice(heading.from).startsWith("#".repeat(heading.level) + " "), heading.text);
  }
  assert.equal(found[1].from, "# One\nbody\n".length);
});

test("only what CommonMark calls a heading", () => {
  const text = [
    "#hashtag",
    "   ### Indented three",
    "    # Indented four: code",
    "# Closed ##",
    "# Kept# hash",
    "## ###",
    "#",
    "#\tTabbed",
    "> # Quoted",
    "\\# Escaped",
    "Text # not at the start",
    "#   Spaced   ",
  ].join("\n");
  assert.deepEqual(shown(text), [
    "3 Indented three",
    "1 Closed",
    "1 Kept# hash",
    "1 Tabbed",
    "1 Spaced",
  ]);
});

test("headings inside fenced code blocks are left out", () => {
  const text = [
    "# Before",
    "```sh",
    "# a shell comment",
    "```",
    "## Between",
    "~~~~",
    "# inside",
    "~~~",
    "# still inside: a shorter run does not close it",
    "```",
    "# and a backtick run does not either",
    "~~~~~",
    "### After",
    "``` not `a` fence",
    "#### Also after",
    "  ```",
    "# in an indented fence",
    "  ```   ",
    "##### Last",
  ].join("\n");
  assert.deepEqual(shown(text), ["1 Before", "2 Between", "3 After", "4 Also after", "5 Last"]);
});

test("an unclosed fence runs to the end of the text", () => {
  assert.deepEqual(shown("# Top\n```\n# not a heading\n"), ["1 Top"]);
});

test("front matter is left out, and its offsets counted", () => {
  const text = "---\ntitle: Plan\n# a YAML comment\n---\n# Plan\n";
  assert.deepEqual(shown(text), ["1 Plan"]);
  assert.equal(headings(text)[0].from, text.indexOf("# Plan"));
  // Without its closing line it is no front matter.
  assert.deepEqual(shown("---\n# Heading\n"), ["1 Heading"]);
  // A rule later in the text is no front matter either.
  assert.deepEqual(shown("Intro\n---\n# One\n---\n"), ["1 One"]);
});

test("Windows line endings and an empty text", () => {
  const text = "# One\r\nbody\r\n## Two\r\n";
  assert.deepEqual(shown(text), ["1 One", "2 Two"]);
  assert.equal(headings(text)[1].from, "# One\r\nbody\r\n".length);
  assert.deepEqual(headings(""), []);
});
