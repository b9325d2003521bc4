// Presence: who else is in the document, with their names, colours, cursors and selections, from
// Yjs awareness. The local cursor is published the way y-codemirror.next does it (relative
// positions under `cursor.anchor` and `cursor.head`, the user under `user.name` and
// `user.color`), so other y-codemirror clients in the same room show it too.
//
// y-codemirror.next's own remote selections colour each user with `style` attributes, which a
// Content-Security-Policy without 'unsafe-inline' styles refuses. Here each colour becomes a
// class whose one rule sets `--presence`, added to a constructed style sheet (CSSOM, which the
// policy allows); editor.css paints carets, selections and the list from that variable.
//
// Awareness comes from other clients: a name is only ever text, and a colour that is not
// `#rrggbb` is replaced by the default.

import { Decoration, ViewPlugin, WidgetType } from "@codemirror/view";
import { RangeSet } from "@codemirror/state";
import * as Y from "yjs";

const DEFAULT_COLOUR = "#30bced";
const MAX_NAME = 40;

/** A `#rrggbb` colour, lower case, or the default. */
export function safeColour(colour) {
  return typeof colour === "string" && /^#[0-9a-fA-F]{6}$/.test(colour)
    ? colour.toLowerCase()
    : DEFAULT_COLOUR;
}

/** A display name: text, trimmed and bounded. */
export function safeName(name) {
  const text = typeof name === "string" ? name.trim() : "";
  return text ? text.slice(0, MAX_NAME) : "Anonymous";
}

let sheet = null;
const classes = new Map();

/** The class that sets `--presence` to `colour`, created on first use. */
export function colourClass(colour) {
  const hex = safeColour(colour);
  let name = classes.get(hex);
  if (name) return name;
  name = "presence-" + hex.slice(1);
  if (sheet === null && "adoptedStyleSheets" in document) {
    sheet = new CSSStyleSheet();
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  }
  if (sheet !== null) sheet.insertRule(`.${name}{--presence:${hex}}`, sheet.cssRules.length);
  classes.set(hex, name);
  return name;
}

/** The user as other clients show it. */
export function userOf(state) {
  const user = (state && state.user) || {};
  return {
    name: safeName(user.name),
    colour: safeColour(user.color),
    viewing: user.readonly === true,
  };
}

class CaretWidget extends WidgetType {
  constructor(name, colour) {
    super();
    this.name = name;
    this.colour = colour;
  }

  toDOM() {
    const caret = document.createElement("span");
    caret.className = `editor-remote-caret ${colourClass(this.colour)}`;
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
          const user = userOf(state);
          const colour = colourClass(user.colour);
          const start = Math.min(anchorAt, headAt);
          const end = Math.max(anchorAt, headAt);
          if (start < end) {
            ranges.push(
              Decoration.mark({ class: `editor-remote-selection ${colour}` }).range(start, end),
            );
          }
          ranges.push(
            Decoration.widget({
              widget: new CaretWidget(user.name, user.colour),
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
 * number.
 */
export function peopleList(list, awareness) {
  const render = () => {
    const items = [];
    awareness.getStates().forEach((state, client) => {
      if (client === awareness.clientID || !state.user) return;
      const user = userOf(state);
      const item = document.createElement("li");
      item.className = `editor-person ${colourClass(user.colour)}`;
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
