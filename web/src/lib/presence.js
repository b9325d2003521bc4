// Presence: who else is in the document, with their names, colours, cursors and selections, from
// Yjs awareness. The local cursor is published the way y-codemirror.next does it (relative
// positions under `cursor.anchor` and `cursor.head`, the user under `user.name` and
// `user.color`), so other y-codemirror clients in the same room show it too.
//
// Colours: each person gets one of the fixed PALETTE, chosen by a stable hash of their user ID
// (colourKey), so the same person has the same colour on every page and after every reload.
// Two people in a room never share one: when two hash to the same colour, the one who joined
// later takes the next free one (assignColours). Every client works the assignment out from the
// same awareness states, so all agree. What a client publishes is the hash, never the user ID,
// and when it joined (on its own clock: the numbers are only compared with each other).
//
// y-codemirror.next's own remote selections colour each user with `style` attributes, which a
// Content-Security-Policy without 'unsafe-inline' styles refuses. Here a colour is a class,
// `presence presence-N`, whose rules in editor.css set `--presence` (and `--presence-ink`, the
// text drawn on it) to the palette's light or dark value, by the reader's colour scheme;
// editor.css paints carets, selections and the list from those variables.
//
// Awareness comes from other clients: a name is only ever text, and a hash, a time or a colour
// that is not what this client would publish is ignored.

import { Decoration, ViewPlugin, WidgetType } from "@codemirror/view";
import { RangeSet } from "@codemirror/state";
import * as Y from "yjs";

/**
 * The collaborator colours, on a light ground: the `--presence-light` values of the
 * `presence-N` classes in editor.css (whose dark values are for a dark ground), published as
 * `user.color` for other y-codemirror clients.
 */
export const PALETTE = [
  "#1f6fb4",
  "#c0392b",
  "#1e7d45",
  "#7d3c98",
  "#a04000",
  "#117a8b",
  "#b03a7a",
  "#5d6d7e",
  "#4b48c4",
  "#7a6608",
];

const MAX_NAME = 40;

/** A display name: text, trimmed and bounded. */
export function safeName(name) {
  const text = typeof name === "string" ? name.trim() : "";
  return text ? text.slice(0, MAX_NAME) : "Anonymous";
}

/** The stable hash of a user ID (32-bit FNV-1a over its UTF-8 bytes), as a whole number. */
export function colourKey(userId) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(String(userId))) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** Whether `key` is a hash colourKey could have given. */
function isKey(key) {
  return Number.isInteger(key) && key >= 0 && key <= 0xffffffff;
}

/** The colour a person gets when no one else in the room has it. */
export function preferredColour(key) {
  return key % PALETTE.length;
}

/**
 * Each client's colour (an index into PALETTE), from everyone in the room: `people`, a list of
 * `{ client, key, joined }` (the Yjs client ID, the person's colourKey, when that client
 * joined). A person's clients (their tabs) share a colour; people take colours in the order they
 * joined (by their earliest client; the client ID breaks a tie), each their preferred one or the
 * next one free after it. With more people than colours, those past the palette get their
 * preferred one again.
 */
export function assignColours(people) {
  const earlier = (a, b) => a.joined < b.joined || (a.joined === b.joined && a.client < b.client);
  const persons = new Map();
  for (const person of people) {
    const known = persons.get(person.key);
    if (!known || earlier(person, known)) persons.set(person.key, person);
  }
  const order = [...persons.values()].sort((a, b) => (earlier(a, b) ? -1 : earlier(b, a) ? 1 : 0));
  const taken = new Set();
  const colours = new Map();
  for (const person of order) {
    const preferred = preferredColour(person.key);
    let colour = preferred;
    for (let step = 0; step < PALETTE.length; step += 1) {
      const candidate = (preferred + step) % PALETTE.length;
      if (!taken.has(candidate)) {
        colour = candidate;
        break;
      }
    }
    taken.add(colour);
    colours.set(person.key, colour);
  }
  return new Map(people.map((person) => [person.client, colours.get(person.key)]));
}

/** The awareness field `user` this client publishes. */
export function localUser({ name, userId, readonly, joined }) {
  const key = colourKey(userId);
  const colour = PALETTE[preferredColour(key)];
  return { name, key, joined, color: colour, colorLight: `${colour}33`, readonly };
}

/** The user of an awareness state as this client shows it; `client` is its Yjs client ID. */
export function userOf(state, client) {
  const user = (state && state.user) || {};
  return {
    name: safeName(user.name),
    // A client that publishes no hash (another kind of client) is a person of its own.
    key: isKey(user.key) ? user.key : colourKey(`client:${client}`),
    joined: Number.isFinite(user.joined) ? user.joined : Number.MAX_SAFE_INTEGER,
    viewing: user.readonly === true,
  };
}

/** Each client's colour in `awareness`, this client's included. */
function roomColours(awareness) {
  const people = [];
  awareness.getStates().forEach((state, client) => {
    if (state && state.user) people.push({ client, ...userOf(state, client) });
  });
  return assignColours(people);
}

/** The classes that give an element the colour `index`. */
function colourClasses(index) {
  return `presence presence-${index}`;
}

/** Gives `element` the colour `index`, replacing any it had. */
function paint(element, index) {
  for (const name of [...element.classList]) {
    if (name === "presence" || name.startsWith("presence-")) element.classList.remove(name);
  }
  if (index !== undefined) element.classList.add(...colourClasses(index).split(" "));
}

class CaretWidget extends WidgetType {
  constructor(name, colour) {
    super();
    this.name = name;
    this.colour = colour;
  }

  toDOM() {
    const caret = document.createElement("span");
    caret.className = `editor-remote-caret ${colourClasses(this.colour)}`;
    caret.setAttribute("aria-hidden", "true");
    // Word joiners keep the caret from breaking the line it sits in.
    caret.append("\u2060");
    const label = document.createElement("span");
    label.className = "editor-remote-name";
    label.textContent = this.name;
    caret.append(label, "\u2060");
    return caret;
  }

  eq(other) {
    return other.name === this.name && other.colour === this.colour;
  }

  ignoreEvent() {
    return true;
  }
}

/**
 * The CodeMirror extension drawing the other clients' cursors and selections in `ytext`, and
 * publishing this client's own.
 */
export function remoteSelections(ytext, awareness) {
  return ViewPlugin.fromClass(
    class {
      constructor(view) {
        this.decorations = RangeSet.of([]);
        this.listener = ({ added, updated, removed }) => {
          const others = added.concat(updated, removed).some((id) => id !== awareness.clientID);
          // Redraw through a transaction, as a plugin may not dispatch during an update.
          if (others) queueMicrotask(() => view.dispatch({}));
        };
        awareness.on("change", this.listener);
      }

      destroy() {
        awareness.off("change", this.listener);
      }

      update(update) {
        this.publish(update);
        this.decorations = this.draw(update.state.doc);
      }

      /** Publishes this client's selection while the editor has the focus. */
      publish(update) {
        const local = awareness.getLocalState();
        if (local === null) return;
        const focused = update.view.hasFocus && document.hasFocus();
        if (!focused) return;
        const selection = update.state.selection.main;
        const anchor = Y.createRelativePositionFromTypeIndex(ytext, selection.anchor);
        const head = Y.createRelativePositionFromTypeIndex(ytext, selection.head);
        const current = local.cursor;
        const same =
          current != null &&
          Y.compareRelativePositions(Y.createRelativePositionFromJSON(current.anchor), anchor) &&
          Y.compareRelativePositions(Y.createRelativePositionFromJSON(current.head), head);
        if (!same) awareness.setLocalStateField("cursor", { anchor, head });
      }

      draw(doc) {
        const ydoc = ytext.doc;
        const ranges = [];
        const colours = roomColours(awareness);
        awareness.getStates().forEach((state, client) => {
          if (client === awareness.clientID || !state.cursor) return;
          const { anchor, head } = state.cursor;
          if (anchor == null || head == null) return;
          let from;
          let to;
          try {
            from = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(anchor), ydoc);
            to = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(head), ydoc);
          } catch {
            return;
          }
          if (!from || !to || from.type !== ytext || to.type !== ytext) return;
          const length = doc.length;
          const anchorAt = Math.min(from.index, length);
          const headAt = Math.min(to.index, length);
          const user = userOf(state, client);
          const colour = colours.get(client) ?? preferredColour(user.key);
          const start = Math.min(anchorAt, headAt);
          const end = Math.max(anchorAt, headAt);
          if (start < end) {
            ranges.push(
              Decoration.mark({ class: `editor-remote-selection ${colourClasses(colour)}` }).range(start, end),
            );
          }
          ranges.push(
            Decoration.widget({
              widget: new CaretWidget(user.name, colour),
              // The local cursor stays outside the remote selection.
              side: headAt - anchorAt > 0 ? -1 : 1,
            }).range(headAt),
          );
        });
        return Decoration.set(ranges, true);
      }
    },
    { decorations: (plugin) => plugin.decorations },
  );
}

/**
 * Keeps `list` (a `<ul>`) showing the other clients in the room, and `list.dataset.count` their
 * number; and `me`, the element naming this client, in this client's colour.
 */
export function peopleList(list, awareness, me) {
  const render = () => {
    const colours = roomColours(awareness);
    paint(me, colours.get(awareness.clientID));
    const items = [];
    awareness.getStates().forEach((state, client) => {
      if (client === awareness.clientID || !state.user) return;
      const user = userOf(state, client);
      const item = document.createElement("li");
      item.className = `editor-person ${colourClasses(colours.get(client))}`;
      item.dataset.client = String(client);
      const swatch = document.createElement("span");
      swatch.className = "editor-swatch";
      swatch.setAttribute("aria-hidden", "true");
      const name = document.createElement("span");
      name.className = "editor-person-name";
      name.textContent = user.name;
      item.append(swatch, name);
      if (user.viewing) {
        const note = document.createElement("span");
        note.className = "editor-person-note";
        note.textContent = " (viewing)";
        item.append(note);
      }
      items.push(item);
    });
    if (items.length === 0) {
      const alone = document.createElement("li");
      alone.className = "editor-alone";
      alone.textContent = "no one";
      items.push(alone);
    }
    list.replaceChildren(...items);
    list.dataset.count = String(items.filter((i) => i.classList.contains("editor-person")).length);
  };
  awareness.on("change", render);
  render();
}
