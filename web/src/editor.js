// The live editor of a document's MDX source. It mounts on every element carrying
// `data-editor`, reading everything from its data attributes (the page holds no inline script):
//
//   <div id="editor" data-editor
//        data-room="DOCUMENT-ID"                 the y-websocket room: an ID or OWNER/NAME/SLUG
//        data-sync-url="/sync"                   the WebSocket endpoint, on this origin
//        data-images-url="/api/v1/documents/DOCUMENT-ID/images"
//        data-csrf="TOKEN"                       the session's CSRF token, for uploads
//        data-user-name="ada"
//        data-user-id="USER-ID"                  whose edits this browser keeps (lib/keeping.js),
//                                                and whose colour others see (lib/presence.js)
//        data-epoch="1"                          the document's Yjs epoch, for the same
//        data-readonly="false"                   "true" for viewers
//        data-style-nonce="NONCE">               the nonce the page's CSP gives style elements
//   </div>
//
// Inside it: a bar with the connection indicator (saved, saving, kept on this device, offline,
// and not saved when the server refuses the edits; see lib/saving.js) and who else is here, the
// CodeMirror 6 editor bound to the Yjs text `source` through y-codemirror.next over
// y-websocket, and the rendered preview beside it. An editor's document is also kept in this
// browser's IndexedDB (lib/keeping.js), so what is typed while the server is away is sent when
// the page is opened again; a read-only page discards what was kept for it.

import { Compartment, EditorState } from "@codemirror/state";
import {
  EditorView,
  drawSelection,
  dropCursor,
  highlightActiveLine,
  highlightSpecialChars,
  keymap,
} from "@codemirror/view";
import { defaultKeymap } from "@codemirror/commands";
import { markdownKeymap, markdownLanguage } from "@codemirror/lang-markdown";
import { LanguageSupport, indentOnInput } from "@codemirror/language";
import { yCollab, yUndoManagerKeymap } from "y-codemirror.next";
import { WebsocketProvider } from "y-websocket";
import * as Y from "yjs";

import { imageUploads } from "./lib/images.js";
import { Keeper, forget, keptName } from "./lib/keeping.js";
import { outline } from "./lib/outline.js";
import { localUser, peopleList, remoteSelections, safeName } from "./lib/presence.js";
import { renderPreview } from "./lib/preview.js";
import { SaveTracker } from "./lib/saving.js";
import { look } from "./lib/theme.js";

const STATES = {
  saved: ["Saved", "Every change you made is stored on the server."],
  saving: ["Saving…", "Some of your changes are not confirmed stored yet."],
  kept: [
    "Kept on this device, not yet on the server",
    "Not connected. Your changes are kept in this browser, even if you close the page, and sent when the server is back.",
  ],
  offline: ["Offline", "Not connected. Reconnecting by itself; your changes are kept in this page meanwhile."],
  refused: ["Not saved", "You can only read this document: your edits here cannot be saved."],
};

/** What the page says when the server refuses this page's edits. */
const REFUSED =
  "Your edits here cannot be saved: you can only read this document. Reload the page to see it as stored.";

/** How long typing pauses before the preview is rendered again, in milliseconds. */
const PREVIEW_DELAY = 150;

function element(tag, className, attributes = {}) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

/** The WebSocket address of `path` on this page's origin. */
function socketBase(path) {
  const url = new URL(path, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href.replace(/\/+$/, "");
}

function mount(root) {
  const data = root.dataset;
  const room = (data.room || "").split("/").map(encodeURIComponent).join("/");
  const readonly = data.readonly === "true";
  const user = { name: safeName(data.userName) };

  const status = element("span", "editor-status", { role: "status", "aria-live": "polite" });
  const message = element("span", "editor-message", { role: "alert" });
  message.hidden = true;
  const me = element("span", "editor-me");
  me.append(
    element("span", "editor-swatch", { "aria-hidden": "true" }),
    `${user.name} (you${readonly ? ", viewing" : ""})`,
  );
  const label = element("span", "editor-people-label", { "aria-hidden": "true" });
  label.textContent = "Also here:";
  const people = element("ul", "editor-people", { "aria-label": "Also here" });
  const bar = element("div", "editor-bar");
  bar.append(status, message, me, label, people);
  const source = element("div", "editor-source");
  const preview = element("section", "editor-preview", { "aria-label": "Preview" });
  const previewBody = element("div", "editor-preview-body");
  preview.append(previewBody);
  const panes = element("div", "editor-panes");
  panes.append(source, preview);
  root.replaceChildren(bar, panes);
  root.classList.toggle("editor-readonly", readonly);

  const doc = new Y.Doc();
  const ytext = doc.getText("source");
  // Each tab talks to the server itself: a change counts as saved only once the server has it.
  const provider = new WebsocketProvider(socketBase(data.syncUrl || "/sync"), room, doc, {
    disableBc: true,
  });
  const awareness = provider.awareness;
  awareness.setLocalStateField(
    "user",
    localUser({ name: user.name, userId: data.userId || "", readonly, joined: Date.now() }),
  );

  let tracker = null;
  const showState = () => {
    const state = tracker ? tracker.state : "offline";
    const [text, title] = STATES[state];
    if (status.dataset.state !== state) {
      status.dataset.state = state;
      status.textContent = text;
      status.title = title;
    }
  };
  tracker = new SaveTracker(provider, showState);
  showState();

  // An editor keeps its document in this browser, for this user; a read-only page has nothing
  // to keep, and drops what was kept when this user could still edit, never sending it.
  const keepAs = data.userId ? keptName(data.userId, data.room || "", data.epoch || "") : null;
  if (keepAs && readonly) forget(keepAs);
  if (keepAs && !readonly) new Keeper(tracker, keepAs);

  const report = (text) => {
    message.hidden = text === null;
    message.textContent = text || "";
  };
  // The server says why it closed a connection (the document was archived or deleted, the
  // server is handing over); shown until the editor is in step with the server again.
  provider.on("connection-close", (event) => {
    if (event && event.reason && !tracker.refused) report(`Disconnected: ${event.reason}`);
  });
  provider.on("sync", (synced) => {
    if (synced && message.textContent.startsWith("Disconnected: ")) report(null);
  });

  // Whether the text can be edited: not for a viewer, nor once the server refused the edits.
  const editing = new Compartment();
  const access = (editable) => [
    EditorState.readOnly.of(!editable),
    EditorView.editable.of(editable),
    // A viewer's text is not editable, so not focusable by itself: Tab still reaches it, to
    // read, select and copy it from the keyboard.
    EditorView.contentAttributes.of(
      editable
        ? { "aria-label": "Document source (MDX)" }
        : { "aria-label": "Document source (MDX)", "aria-readonly": "true", tabindex: "0" },
    ),
    editable && data.imagesUrl
      ? imageUploads({ ytext, imagesUrl: data.imagesUrl, csrf: data.csrf || "", report })
      : [],
  ];
  // The light or the dark look (lib/theme.js), as the page's colours follow prefers-color-scheme.
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  const looks = new Compartment();
  const extensions = [
    highlightSpecialChars(),
    drawSelection(),
    dropCursor(),
    highlightActiveLine(),
    indentOnInput(),
    looks.of(look(dark.matches)),
    // The Markdown (GFM) language alone: code blocks and HTML inside are not highlighted, which
    // keeps the HTML, CSS and JavaScript grammars out of the bundle.
    new LanguageSupport(markdownLanguage),
    EditorView.lineWrapping,
    keymap.of([...yUndoManagerKeymap, ...markdownKeymap, ...defaultKeymap]),
    yCollab(ytext, null, { undoManager: new Y.UndoManager(ytext) }),
    remoteSelections(ytext, awareness),
    editing.of(access(!readonly)),
  ];
  if (data.styleNonce) extensions.push(EditorView.cspNonce.of(data.styleNonce));
  const view = new EditorView({
    state: EditorState.create({ doc: ytext.toString(), extensions }),
    parent: source,
  });

  dark.addEventListener("change", (event) => {
    view.dispatch({ effects: looks.reconfigure(look(event.matches)) });
  });

  peopleList(people, awareness, me);
  panes.prepend(outline(ytext, view));

  // The server answered an edit with "permission denied": this member can only read the
  // document now. The page says so and stops taking edits (the keeper drops what it kept).
  let refusedShown = false;
  tracker.watch(() => {
    if (!tracker.refused || refusedShown) return;
    refusedShown = true;
    root.classList.add("editor-readonly");
    view.dispatch({ effects: editing.reconfigure(access(false)) });
    report(REFUSED);
  });

  let pending = 0;
  const render = () => {
    pending = 0;
    previewBody.innerHTML = renderPreview(ytext.toString());
  };
  ytext.observe(() => {
    if (pending === 0) pending = window.setTimeout(render, PREVIEW_DELAY);
  });
  render();

  // Leaving loses only what is neither stored on the server nor kept in this browser.
  window.addEventListener("beforeunload", (event) => {
    if (tracker.unsaved) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  return { view, provider, doc };
}

document.querySelectorAll("[data-editor]").forEach(mount);
