import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";
import {Marked, type RendererObject, type Tokens} from "marked";
import {escapeHtml} from "./escapeHtml.js";
import {markedMath} from "./markedMath.js";
import {safeUrl} from "./safeUrl.js";

// Model output is untrusted. Two layers keep it inert:
// 1. marked's renderer never emits raw HTML (it is shown as text), links only with an allowed URL, no images;
// 2. DOMPurify then sanitises the whole HTML again (where a DOM exists: in the app, not in Node's unit tests).

const linkAttributes = 'target="_blank" rel="noopener noreferrer"';

// Images would load remote content (tracking) or be refused by the CSP: show them as links instead.
function image(token: Tokens.Image): string {
    const label = `[image${token.text ? `: ${escapeHtml(token.text)}` : ""}]`;
    const href = safeUrl(token.href);
    return href == null ? label : `<a href="${escapeHtml(href)}" ${linkAttributes}>${label}</a>`;
}

function code(token: Tokens.Code): string {
    const lang = /^[\w+#.-]+/.exec(token.lang ?? "")?.[0]?.toLowerCase() ?? "";
    const known = lang !== "" && hljs.getLanguage(lang) != null;
    const body = known ? hljs.highlight(token.text, {language: lang, ignoreIllegals: true}).value : escapeHtml(token.text);
    return (
        '<div class="code-block"><div class="code-header">' +
        `<span class="code-lang">${escapeHtml(lang || "text")}</span>` +
        '<button type="button" class="code-copy" data-copy-code="" aria-label="Copy code">Copy</button></div>' +
        `<pre><code class="hljs${known ? ` language-${lang}` : ""}">${body}</code></pre></div>\n`
    );
}

function html(token: Tokens.HTML | Tokens.Tag): string {
    const text = escapeHtml(token.text);
    return "block" in token && token.block ? `<p>${text}</p>\n` : text;
}

const renderer: RendererObject = {
    link(token) {
        const text = this.parser.parseInline(token.tokens);
        const href = safeUrl(token.href);
        if (href == null) return text;
        const title = token.title ? ` title="${escapeHtml(token.title)}"` : "";
        return `<a href="${escapeHtml(href)}"${title} ${linkAttributes}>${text}</a>`;
    },
    image,
    code,
    html
};

// breaks: a single newline in an answer is a line break, as chat apps show it (a poem, an address, steps without
// blank lines between them); Markdown's own rule would join such lines into one paragraph.
const marked = new Marked({gfm: true, breaks: true, async: false}, markedMath(), {renderer});

const purifyConfig = {
    // KaTeX's MathML wraps its source in <semantics><annotation>: plain, inert elements.
    ADD_TAGS: ["semantics", "annotation"],
    FORBID_TAGS: ["style", "form", "textarea", "select", "iframe", "img", "video", "audio", "source", "picture"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i
};

let purifierReady = false;

/** The second layer on its own: any HTML -> HTML without scripts, handlers, forms, embeds or unsafe links (a no-op without a DOM). */
export function sanitizeHtml(dirty: string): string {
    if (!DOMPurify.isSupported) return dirty;
    if (!purifierReady) {
        DOMPurify.addHook("afterSanitizeAttributes", (node) => {
            if (node.tagName === "A" && node.hasAttribute("href")) {
                node.setAttribute("target", "_blank");
                node.setAttribute("rel", "noopener noreferrer");
            }
        });
        purifierReady = true;
    }
    return DOMPurify.sanitize(dirty, purifyConfig);
}

/** Markdown from a model -> safe HTML: GFM, highlighted code, KaTeX math; no raw HTML, scripts or unsafe links. */
export function renderMarkdown(markdown: string): string {
    return sanitizeHtml(marked.parse(markdown, {async: false}));
}
