// Pasting or dropping an image into the editor: the file is uploaded to the document's images
// route (`POST /api/v1/documents/{id}/images`, the raw bytes as the body, the session's CSRF
// token in `X-CSRF-Token`), and an MDX image `![name](address?w=WIDTH)` is inserted where it was
// pasted or dropped, pointing at a thumbnail the server makes from the stored image. The place
// is kept as a Yjs relative position, so what others type meanwhile does not move it.

import { EditorView } from "@codemirror/view";
import * as Y from "yjs";

/** The thumbnail width asked for: one of the widths the server makes. */
export const THUMBNAIL_WIDTH = 720;

/** The image files among `files`. */
function imagesIn(files) {
  return Array.from(files || []).filter((file) => file.type.startsWith("image/"));
}

/** A file name as an image's alternative text: no brackets or line breaks, bounded. */
export function altText(name) {
  const base = String(name || "").replace(/\.[A-Za-z0-9]{1,5}$/, "");
  const clean = base.replace(/[[\]\\\r\n]+/g, " ").trim().slice(0, 80);
  return clean || "image";
}

/** What the server said when it refused an upload. */
async function refusal(answer) {
  try {
    const body = await answer.json();
    if (body && body.error && typeof body.error.message === "string") return body.error.message;
  } catch {
    // Not JSON: the status says it.
  }
  return `the server answered ${answer.status}`;
}

/**
 * The extension uploading pasted and dropped images.
 *
 * @param {object} options
 * @param {Y.Text} options.ytext the document's text
 * @param {string} options.imagesUrl the document's images route
 * @param {string} options.csrf the session's CSRF token
 * @param {(message: string | null) => void} options.report shows progress or a failure
 */
export function imageUploads({ ytext, imagesUrl, csrf, report }) {
  const upload = async (file, at) => {
    const name = altText(file.name);
    report(`Uploading ${name}…`);
    let answer;
    try {
      answer = await fetch(imagesUrl, {
        method: "POST",
        body: file,
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
      });
    } catch {
      report(`${name} could not be uploaded: the server cannot be reached`);
      return;
    }
    if (!answer.ok) {
      report(`${name} could not be uploaded: ${await refusal(answer)}`);
      return;
    }
    const image = await answer.json();
    const place = Y.createAbsolutePositionFromRelativePosition(at, ytext.doc);
    const index = place && place.type === ytext ? place.index : ytext.length;
    ytext.insert(index, `![${name}](${image.address}?w=${THUMBNAIL_WIDTH})\n`);
    report(null);
  };

  const take = (files, position) => {
    const images = imagesIn(files);
    if (images.length === 0) return false;
    for (const file of images) {
      const at = Y.createRelativePositionFromTypeIndex(ytext, position);
      upload(file, at);
    }
    return true;
  };

  return EditorView.domEventHandlers({
    paste(event, view) {
      if (view.state.readOnly) return false;
      const handled = take(event.clipboardData && event.clipboardData.files, view.state.selection.main.head);
      if (handled) event.preventDefault();
      return handled;
    },
    drop(event, view) {
      if (view.state.readOnly) return false;
      const position =
        view.posAtCoords({ x: event.clientX, y: event.clientY }) ?? view.state.selection.main.head;
      const handled = take(event.dataTransfer && event.dataTransfer.files, position);
      if (handled) event.preventDefault();
      return handled;
    },
  });
}
