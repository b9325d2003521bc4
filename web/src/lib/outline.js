// The document's outline: its Markdown headings (`#` to `######` at the start of a line, ATX
// headings as CommonMark reads them), leaving out those inside fenced code blocks and inside
// front matter, as a list of links beside the editor. Following one moves the editor to that
// heading: it scrolls there and puts the cursor at the heading's start. The list is worked out
// from the Yjs text, again a moment after each change, so it follows everyone's typing.

import { EditorView } from "@codemirror/view";

/** How long typing pauses before the outline is worked out again, in milliseconds. */
const OUTLINE_DELAY = 150;

const HEADING = /^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;

/**
 * The headings of the Markdown `text`, in order: `{ level, text, from }`, `from` being the offset
 * of the heading's line in `text`. An empty heading (`#` alone) is left out: it has nothing to
 * show.
 */
export function headings(text) {
  const found = [];
  const lines = text.split("\n");
  let from = 0;
  let fence = null;
  let first = 0;
  // Front matter: a `---` first line up to the next `---` (or `...`) line, when there is one.
  if (lines.length > 1 && lines[0].replace(/\r$/, "") === "---") {
    const end = lines.findIndex((line, index) => index > 0 && /^(---|\.\.\.)[ \t]*\r?$/.test(line));
    if (end > 0) {
      for (let index = 0; index <= end; index += 1) from += lines[index].length + 1;
      first = end + 1;
    }
  }
  for (let index = first; index < lines.length; index += 1) {
    const line = lines[index].replace(/\r$/, "");
    const start = from;
    from += lines[index].length + 1;
    const marker = FENCE.exec(line);
    if (fence !== null) {
      // Closed by a run of the same character at least as long, with nothing after it.
      if (marker && marker[1][0] === fence[0] && marker[1].length >= fence.length && marker[2].trim() === "") {
        fence = null;
      }
      continue;
    }
    // A backtick fence's info string may not hold a backtick; otherwise it is no fence.
    if (marker && !(marker[1][0] === "`" && marker[2].includes("`"))) {
      fence = marker[1];
      continue;
    }
    const heading = HEADING.exec(line);
    if (!heading) continue;
    // The closing run of `#`, when spaces set it apart (or it is all there is), is not text.
    const words = heading[2].trim().replace(/(^|[ \t]+)#+[ \t]*$/, "").trim();
    if (words) found.push({ level: heading[1].length, text: words, from: start });
  }
  return found;
}

/** Moves `view` to the heading at `from`: the cursor at its start, scrolled to near the top. */
function moveTo(view, from) {
  const at = Math.min(from, view.state.doc.length);
  view.dispatch({
    selection: { anchor: at },
    effects: EditorView.scrollIntoView(at, { y: "start", yMargin: 24 }),
  });
  view.focus();
}

/**
 * The outline of `ytext`, kept up to date, as a `<nav>` to put beside `view` (the editor of the
 * same text).
 */
export function outline(ytext, view) {
  const nav = document.createElement("nav");
  nav.className = "editor-outline";
  nav.setAttribute("aria-labelledby", "editor-outline-title");
  const title = document.createElement("h2");
  title.id = "editor-outline-title";
  title.className = "editor-outline-title";
  title.textContent = "Outline";
  const list = document.createElement("ol");
  list.className = "editor-outline-list";
  const empty = document.createElement("p");
  empty.className = "editor-outline-empty";
  empty.textContent = "No headings yet.";
  nav.append(title, list, empty);

  list.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("a[data-heading]") : null;
    if (!link) return;
    event.preventDefault();
    // The heading of that rank in the text as the editor holds it now, which a change since the
    // list was drawn may have moved.
    const heading = headings(view.state.doc.toString())[Number(link.dataset.heading)];
    if (heading) moveTo(view, heading.from);
  });

  // Drawn in place: a link that is the same as before stays the same element, so the keyboard
  // focus on it survives a change elsewhere in the text.
  let pending = 0;
  const render = () => {
    pending = 0;
    const found = headings(ytext.toString());
    found.forEach((heading, index) => {
      let item = list.children[index];
      if (!item) {
        item = document.createElement("li");
        const link = document.createElement("a");
        link.href = `#outline-${index + 1}`;
        link.dataset.heading = String(index);
        item.append(link);
        list.append(item);
      }
      const level = `editor-outline-level-${heading.level}`;
      if (item.className !== level) item.className = level;
      const link = item.firstElementChild;
      if (link.textContent !== heading.text) link.textContent = heading.text;
    });
    while (list.children.length > found.length) list.lastElementChild.remove();
    list.hidden = found.length === 0;
    empty.hidden = found.length > 0;
  };
  // The first change is the document arriving from the server or from this device's kept copy:
  // drawn at once, so the outline never says "No headings yet." of a document that has some.
  let arrived = false;
  ytext.observe(() => {
    if (pending === 0) pending = window.setTimeout(render, arrived ? OUTLINE_DELAY : 0);
    arrived = true;
  });
  render();
  return nav;
}
