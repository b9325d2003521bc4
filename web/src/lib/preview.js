// The preview of a document's MDX source: the Markdown rendered, everything MDX adds to it shown
// as code and never run.
//
// markdown-it with `html: false` is the whole sanitizer: it escapes every `<` the author wrote,
// so the only tags in its output are the ones its own rules make, and its link check refuses
// `javascript:`, `vbscript:`, `file:` and non-image `data:` URLs. On top of that:
//   - MDX's own syntax is recognised and shown as code: a block that starts with an import or
//     export (ESM), a JSX element or fragment, or a `{expression}`, up to the next blank line;
//     and inline JSX tags and `{expressions}` inside paragraphs. JSX children written as
//     Markdown between an opening and a closing tag on their own lines render as Markdown;
//   - an image is shown only when it comes from this server (or is `data:`/`blob:`), as the
//     page's Content-Security-Policy wants; any other is shown as its address;
//   - links to other sites open without the page as their opener or referrer.

import MarkdownIt from "markdown-it";

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });
const escape = md.utils.escapeHtml;

/** Whether `line` (a block's first line, indentation removed) starts MDX flow syntax. */
function mdxKind(line) {
  if (/^(?:import|export)\s/.test(line)) return "esm";
  // `<https://…>` and `<name@host>` are Markdown autolinks, not elements.
  if (/^<[^\s>]+[:@][^\s>]*>/.test(line)) return null;
  if (/^<(?:[A-Za-z]|\/|>)/.test(line)) return "jsx";
  if (line.startsWith("{")) return "expression";
  return null;
}

md.block.ruler.before(
  "html_block",
  "mdx_flow",
  (state, startLine, endLine, silent) => {
    if (state.sCount[startLine] - state.blkIndent >= 4) return false;
    const start = state.bMarks[startLine] + state.tShift[startLine];
    const kind = mdxKind(state.src.slice(start, state.eMarks[startLine]));
    if (kind === null) return false;
    if (silent) return true;
    let next = startLine + 1;
    while (next < endLine && !state.isEmpty(next)) next += 1;
    const token = state.push("mdx_block", "pre", 0);
    token.map = [startLine, next];
    token.info = kind;
    token.content = state.getLines(startLine, next, state.blkIndent, false);
    state.line = next;
    return true;
  },
  { alt: ["blockquote"] },
);

/** The length of the `{…}` expression at the start of `text`, braces balanced, or 0. */
function expressionLength(text) {
  let depth = 0;
  for (let i = 0; i < text.length && i < 2000; i += 1) {
    if (text[i] === "{") depth += 1;
    else if (text[i] === "}") {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  return 0;
}

md.inline.ruler.after("autolink", "mdx_inline", (state, silent) => {
  const first = state.src.charCodeAt(state.pos);
  if (first !== 0x3c /* < */ && first !== 0x7b /* { */) return false;
  const rest = state.src.slice(state.pos, state.posMax);
  let length = 0;
  if (first === 0x3c) {
    const tag = /^<\/?[A-Za-z][\w.:-]*(?:\s[^<>]*)?>/.exec(rest) || /^<\/?>/.exec(rest);
    length = tag ? tag[0].length : 0;
  } else {
    length = expressionLength(rest);
  }
  if (length === 0) return false;
  if (!silent) {
    const token = state.push("mdx_inline", "code", 0);
    token.content = rest.slice(0, length);
  }
  state.pos += length;
  return true;
});

md.renderer.rules.mdx_block = (tokens, index) => {
  const token = tokens[index];
  return `<pre class="preview-mdx" data-mdx="${escape(token.info)}"><code>${escape(token.content)}</code></pre>\n`;
};

md.renderer.rules.mdx_inline = (tokens, index) =>
  `<code class="preview-mdx">${escape(tokens[index].content)}</code>`;

/** Whether `address` resolves to this server, or to data the page already holds. */
function loadable(address) {
  try {
    const url = new URL(address, window.location.href);
    return url.origin === window.location.origin || url.protocol === "data:" || url.protocol === "blob:";
  } catch {
    return false;
  }
}

const renderImage = md.renderer.rules.image;
md.renderer.rules.image = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const source = token.attrGet("src") || "";
  if (!loadable(source)) {
    return `<span class="preview-elsewhere">[image at ${escape(source)}]</span>`;
  }
  token.attrSet("loading", "lazy");
  return renderImage(tokens, index, options, env, self);
};

const renderLinkOpen =
  md.renderer.rules.link_open || ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
md.renderer.rules.link_open = (tokens, index, options, env, self) => {
  const token = tokens[index];
  if (!loadable(token.attrGet("href") || "")) token.attrSet("rel", "noopener noreferrer");
  return renderLinkOpen(tokens, index, options, env, self);
};

/** The preview's HTML for `source`: safe to assign to `innerHTML`. */
export function renderPreview(source) {
  return md.render(source);
}
