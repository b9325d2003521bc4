// The collaborator colours of src/lib/presence.js: a stable hash of the user ID picks a colour
// of the palette, the later of two people who would share one takes the next free one, every
// client works out the same answer, and the palette in src/editor.css (light and dark values)
// meets WCAG AA against the pages' grounds (from page.css) and with the names drawn on it.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  PALETTE,
  assignColours,
  colourKey,
  localUser,
  preferredColour,
  userOf,
} from "../src/lib/presence.js";

const css = readFileSync(new URL("../src/editor.css", import.meta.url), "utf8");
const pageCss = readFileSync(
  new URL("../../crates/fermata-http/src/view/page.css", import.meta.url),
  "utf8",
);

/** A user ID whose preferred colour is `colour`, the `nth` such one. */
function idFor(colour, nth = 0) {
  let found = -1;
  for (let n = 0; ; n += 1) {
    const id = `user-${n}`;
    if (preferredColour(colourKey(id)) === colour && (found += 1) === nth) return id;
  }
}

/** A person in the room: one client of the user `id`, joined at `joined`. */
function person(client, id, joined) {
  return { client, key: colourKey(id), joined };
}

test("a user's colour comes from a stable hash of their ID", () => {
  // FNV-1a, 32 bits: the same number on every page and after every reload.
  assert.equal(colourKey(""), 0x811c9dc5);
  assert.equal(colourKey("a"), 0xe40c292c);
  const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  assert.equal(colourKey(id), colourKey(id));
  assert.notEqual(colourKey(id), colourKey(id.toUpperCase()));
  // Non-ASCII IDs are hashed by their UTF-8 bytes.
  assert.equal(colourKey("é"), colourKey("\u00e9"));
  // Many IDs use every colour of the palette.
  const used = new Set();
  for (let n = 0; n < 500; n += 1) {
    const colour = preferredColour(colourKey(`${n}-4f1c-9a7e-0b3d2c1e5f60`));
    assert.ok(colour >= 0 && colour < PALETTE.length);
    used.add(colour);
  }
  assert.equal(used.size, PALETTE.length);
});

test("alone in a room, everyone has their own colour", () => {
  const ada = idFor(2);
  const colours = assignColours([person(11, ada, 1000)]);
  assert.deepEqual([...colours], [[11, 2]]);
});

test("two people who would share a colour differ: the later joiner takes the next free one", () => {
  const [first, second] = [idFor(4, 0), idFor(4, 1)];
  const room = [person(7, second, 2000), person(3, first, 1000)];
  const colours = assignColours(room);
  assert.equal(colours.get(3), 4, "the first to join keeps their colour");
  assert.equal(colours.get(7), 5, "the later joiner takes the next one");
  // Every client is handed the states in its own order, and agrees.
  assert.deepEqual(assignColours([...room].reverse()), colours);

  // The next one taken too: the one after it; past the end of the palette, from its start.
  const third = idFor(5);
  const busier = assignColours([...room, person(9, third, 3000)]);
  assert.equal(busier.get(9), 6);
  const [last, lastButOne] = [idFor(PALETTE.length - 1, 0), idFor(PALETTE.length - 1, 1)];
  const wrapped = assignColours([person(1, last, 1), person(2, lastButOne, 2)]);
  assert.deepEqual([wrapped.get(1), wrapped.get(2)], [PALETTE.length - 1, 0]);

  // Once the first leaves, the later joiner has their own colour back.
  assert.equal(assignColours([person(7, second, 2000)]).get(7), 4);
});

test("a tie on joining is broken by the client ID, the same way everywhere", () => {
  const [one, two] = [idFor(1, 0), idFor(1, 1)];
  const colours = assignColours([person(50, one, 5), person(40, two, 5)]);
  assert.deepEqual([colours.get(40), colours.get(50)], [1, 2]);
});

test("one person's tabs share a colour, and count as one person", () => {
  const [ada, bob] = [idFor(6, 0), idFor(6, 1)];
  const colours = assignColours([
    person(1, ada, 100),
    person(2, bob, 200),
    // ada's second tab, opened after bob joined: still ada, who was there first.
    person(3, ada, 300),
  ]);
  assert.deepEqual([colours.get(1), colours.get(2), colours.get(3)], [6, 7, 6]);
});

test("everyone differs until the palette runs out", () => {
  const room = Array.from({ length: PALETTE.length + 3 }, (_, n) =>
    person(n + 1, idFor(0, n), 1000 + n),
  );
  const colours = assignColours(room);
  const first = room.slice(0, PALETTE.length).map((p) => colours.get(p.client));
  assert.equal(new Set(first).size, PALETTE.length);
  // Past the palette, each has their preferred colour again.
  for (const p of room.slice(PALETTE.length)) assert.equal(colours.get(p.client), 0);
});

test("a client publishes the hash and never the user ID, and others' claims are checked", () => {
  const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  const user = localUser({ name: "ada", userId: id, readonly: false, joined: 1234 });
  assert.equal(user.key, colourKey(id));
  assert.equal(user.color, PALETTE[preferredColour(colourKey(id))]);
  assert.equal(user.colorLight, `${user.color}33`);
  assert.ok(!JSON.stringify(user).includes(id), "the user ID left the page");

  assert.deepEqual(userOf({ user }, 5), { name: "ada", key: user.key, joined: 1234, viewing: false });
  // A client publishing no hash, or nonsense, is a person of its own; a name is text.
  const other = userOf({ user: { name: "  <b>x</b> ", key: "1", joined: "soon", readonly: true } }, 9);
  assert.deepEqual(other, {
    name: "<b>x</b>",
    key: colourKey("client:9"),
    joined: Number.MAX_SAFE_INTEGER,
    viewing: true,
  });
  assert.equal(userOf({}, 9).name, "Anonymous");
  assert.equal(userOf({ user: { key: -1 } }, 9).key, colourKey("client:9"));
});

// The palette's rules in editor.css: `.presence-N { --presence-light: #...; --presence-dark: #...; }`.
function palette() {
  const rules = [...css.matchAll(/\.presence-(\d+)\s*\{([^}]*)\}/g)];
  return rules.map(([, index, body]) => {
    const value = (name) => new RegExp(`--presence-${name}:\\s*(#[0-9a-fA-F]{6})`).exec(body)[1].toLowerCase();
    return { index: Number(index), light: value("light"), dark: value("dark") };
  });
}

/** The text drawn on a colour, in the light and in the dark scheme (the `.presence` rules). */
function inks() {
  const found = [...css.matchAll(/\.presence\s*\{[^}]*--presence-ink:\s*(#[0-9a-fA-F]{3,6})/g)].map((m) => m[1]);
  const darkBlock = css.slice(css.lastIndexOf("@media (prefers-color-scheme: dark)"));
  const dark = /\.presence\s*\{[^}]*--presence-ink:\s*(#[0-9a-fA-F]{3,6})/.exec(darkBlock)[1];
  return { light: found[0], dark };
}

/** page.css's ground, `--bg`, in the light scheme and in the dark one. */
function grounds() {
  const darkAt = pageCss.indexOf("prefers-color-scheme:dark");
  const light = /--bg:\s*(#[0-9a-fA-F]{3,6})/.exec(pageCss.slice(0, darkAt))[1];
  const dark = /--bg:\s*(#[0-9a-fA-F]{3,6})/.exec(pageCss.slice(darkAt))[1];
  return { light, dark };
}

/** The source's and the preview's ground in the dark (editor.css). */
function paper() {
  const darkAt = css.indexOf("@media (prefers-color-scheme: dark)");
  return /\.editor-preview\s*\{[^}]*background:\s*(#[0-9a-fA-F]{6})/.exec(css.slice(darkAt))[1];
}

function channels(hex) {
  const full = hex.length === 4 ? `#${[...hex.slice(1)].map((c) => c + c).join("")}` : hex;
  return [1, 3, 5].map((at) => parseInt(full.slice(at, at + 2), 16) / 255);
}

function luminance(hex) {
  const [r, g, b] = channels(hex).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG's contrast ratio of two colours. */
function contrast(a, b) {
  const [high, low] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (high + 0.05) / (low + 0.05);
}

/** CIE76 distance of two colours in Lab: how far apart they look. */
function distance(a, b) {
  const lab = (hex) => {
    const [r, g, b] = channels(hex).map((c) => (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
    const f = (t) => (t > 0.008856 ? Math.cbrt(t) : 7.787 * t + 16 / 116);
    const x = f((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047);
    const y = f(0.2126 * r + 0.7152 * g + 0.0722 * b);
    const z = f((0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883);
    return [116 * y - 16, 500 * (x - y), 200 * (y - z)];
  };
  return Math.hypot(...lab(a).map((v, i) => v - lab(b)[i]));
}

test("the palette in editor.css is the one the script chooses from", () => {
  const rules = palette();
  assert.deepEqual(
    rules.map((rule) => rule.index),
    PALETTE.map((_, index) => index),
  );
  assert.deepEqual(
    rules.map((rule) => rule.light),
    PALETTE,
  );
  assert.ok(PALETTE.length >= 8 && PALETTE.length <= 12);
});

test("every colour meets WCAG AA on its ground and with its name on it, light and dark", () => {
  const { light: lightGround, dark: darkGround } = grounds();
  const ink = inks();
  const sourceInTheDark = paper();
  for (const { index, light, dark } of palette()) {
    const at = (what, ratio, wanted) =>
      assert.ok(ratio >= wanted, `colour ${index} ${what}: ${ratio.toFixed(2)} < ${wanted}`);
    at(`${light} on the light page ${lightGround}`, contrast(light, lightGround), 4.5);
    at(`name ${ink.light} on ${light}`, contrast(ink.light, light), 4.5);
    at(`${dark} on the dark page ${darkGround}`, contrast(dark, darkGround), 4.5);
    at(`${dark} on the source in the dark ${sourceInTheDark}`, contrast(dark, sourceInTheDark), 4.5);
    at(`name ${ink.dark} on ${dark}`, contrast(ink.dark, dark), 4.5);
  }
});

test("the colours are far enough apart to tell people apart", () => {
  for (const scheme of ["light", "dark"]) {
    const colours = palette().map((rule) => rule[scheme]);
    for (let i = 0; i < colours.length; i += 1) {
      for (let j = i + 1; j < colours.length; j += 1) {
        const apart = distance(colours[i], colours[j]);
        assert.ok(apart >= 15, `${scheme}: ${colours[i]} and ${colours[j]} are ${apart.toFixed(1)} apart`);
      }
    }
  }
});
