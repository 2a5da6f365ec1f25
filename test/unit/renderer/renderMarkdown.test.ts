// @vitest-environment jsdom
import DOMPurify from "dompurify";
import {describe, expect, test, vi} from "vitest";
import {renderMarkdown, sanitizeHtml} from "../../../renderer/lib/renderMarkdown.js";

// jsdom gives DOMPurify a DOM, so both layers run here as in the app: marked's renderer (safe on its own, checked by
// the first tests) and DOMPurify over its output (checked by the last ones, which fail without it).
const tags = (html: string) =>
    [...html.matchAll(/<([a-z][\w-]*)([^>]*)>/gi)].map((match) => ({name: match[1]!.toLowerCase(), attributes: match[2]!}));

describe("renderMarkdown", () => {
    test("raw HTML never survives as HTML: scripts and event handlers are inert text", () => {
        for (const payload of [
            "Hi <script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            '<div onclick="steal()">\nblock html\n</div>',
            '<iframe src="https://evil.example"></iframe>',
            '<a href="javascript:alert(1)">x</a>'
        ]) {
            const html = renderMarkdown(payload);
            const names = tags(html).map((tag) => tag.name);
            expect(names.filter((name) => !["p", "a"].includes(name))).toEqual([]);
            expect(tags(html).some((tag) => /\son\w+\s*=/i.test(tag.attributes))).toBe(false);
            // (The escaped source may show `href="javascript:` as text: only attributes matter.)
            expect(tags(html).some((tag) => /href\s*=\s*["']?\s*javascript:/i.test(tag.attributes))).toBe(false);
        }
        expect(renderMarkdown("<script>alert(1)</script>")).toContain("&lt;script&gt;");
    });

    test("a single newline in an answer is a line break, as chat apps show it; code and blank lines keep their meaning", () => {
        const html = renderMarkdown("Roses are red,\nviolets are blue.\n\nNew paragraph.");
        expect(html).toMatch(/Roses are red,<br>\s*violets are blue\.<\/p>/);
        expect(html.match(/<p>/g)).toHaveLength(2);
        // Inside a code block a newline stays a newline.
        expect(renderMarkdown("```\na\nb\n```")).not.toContain("<br>");
        // A list stays a list.
        expect(renderMarkdown("Steps:\n1. one\n2. two")).toMatch(/<ol>[\s\S]*<li>one<\/li>[\s\S]*<li>two<\/li>/);
    });

    test("javascript: and other unsafe links lose their link, keeping their text", () => {
        const hrefs = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java%0ascript:alert(1)", "data:text/html,<b>x</b>", "vbscript:x"];
        for (const href of [...hrefs, "file:///etc/passwd"]) {
            const html = renderMarkdown(`[click me](${href})`);
            expect(tags(html).map((tag) => tag.name)).toEqual(["p"]);
            expect(html).toContain("click me");
        }
    });

    test("safe links open outside the app with noopener noreferrer", () => {
        const html = renderMarkdown("See [the docs](https://example.com/a?b=1) or <mailto:me@example.com>.");
        expect(html).toContain('<a href="https://example.com/a?b=1" target="_blank" rel="noopener noreferrer">the docs</a>');
        expect(html).toMatch(/<a href="mailto:me@example.com" target="_blank" rel="noopener noreferrer">/);
    });

    test("images become links instead of loading anything", () => {
        const html = renderMarkdown("![a cat](https://example.com/cat.png)");
        expect(html).not.toContain("<img");
        expect(html).toContain("[image: a cat]");
    });

    test("code is highlighted and escaped", () => {
        const html = renderMarkdown("```ts\nconst answer: number = 42; // <b>\n```");
        expect(html).toContain('<span class="hljs-keyword">const</span>');
        expect(html).toContain('class="hljs language-ts"');
        expect(html).toContain("&lt;b&gt;");
        expect(html).toContain("data-copy-code");
        const plain = renderMarkdown("```\n<script>alert(1)</script>\n```");
        expect(plain).toContain("&lt;script&gt;");
        expect(plain).not.toContain("<script");
    });

    test("$x^2$ renders KaTeX inline, $$...$$ as a display block", () => {
        const inline = renderMarkdown("The area is $x^2$.");
        expect(inline).toContain('class="katex"');
        expect(inline).toContain("<msup><mi>x</mi><mn>2</mn></msup>");
        expect(inline).not.toContain("$x^2$");

        const display = renderMarkdown("$$\n\\frac{a}{b}\n$$");
        expect(display).toContain('class="math-block"');
        expect(display).toContain("katex-display");
        expect(renderMarkdown("\\(a+b\\) and \\[c\\]")).toContain("katex-display");
    });

    test("dollar amounts and code spans stay text", () => {
        expect(renderMarkdown("It costs $5 and $10.")).not.toContain("katex");
        expect(renderMarkdown("Use `$x$` literally")).toContain("<code>$x$</code>");
    });

    test("TeX cannot smuggle links or HTML through KaTeX", () => {
        const html = renderMarkdown("$\\href{javascript:alert(1)}{x}$ $\\htmlId{a}{b}$ $<img onerror=x>$");
        expect(tags(html).some((tag) => tag.name === "a" || / id=/.test(tag.attributes))).toBe(false);
        expect(tags(html).some((tag) => tag.name === "img" || /\son\w+\s*=/i.test(tag.attributes))).toBe(false);
    });

    test("DOMPurify really runs: every rendering passes through it and comes back serialised by the DOM", () => {
        expect(DOMPurify.isSupported).toBe(true);
        const sanitize = vi.spyOn(DOMPurify, "sanitize");
        try {
            // marked escapes quotes as entities; DOMPurify's DOM serialisation writes them plainly in text.
            expect(renderMarkdown('It\'s "quoted"')).toBe('<p>It\'s "quoted"</p>\n');
            expect(sanitize).toHaveBeenCalledTimes(1);
        } finally {
            sanitize.mockRestore();
        }
    });

    test("the second layer strips what a broken first layer would let through", () => {
        const html = sanitizeHtml(
            [
                '<p onclick="steal()">text</p>',
                "<script>alert(1)</script>",
                "<img src=x onerror=alert(1)>",
                '<iframe src="https://evil.example"></iframe>',
                '<form action="https://evil.example"><button formaction="https://evil.example">go</button></form>',
                "<style>body{display:none}</style>",
                '<a href="javascript:alert(1)">js</a>',
                '<a href="data:text/html,x">data</a>',
                '<a href="https://example.com">ok</a>',
                '<svg><a href="javascript:alert(1)"><text>svg link</text></a></svg>'
            ].join("")
        );
        const dom = new DOMParser().parseFromString(`<body>${html}</body>`, "text/html").body;
        expect(dom.querySelectorAll("script, img, iframe, form, style, [formaction]").length).toBe(0);
        expect(
            [...dom.querySelectorAll("*")].some((node) => [...node.attributes].some((attribute) => attribute.name.startsWith("on")))
        ).toBe(false);
        const hrefs = [...dom.querySelectorAll("a")].map((link) => link.getAttribute("href") ?? link.getAttribute("xlink:href"));
        expect(hrefs.filter((href) => href != null)).toEqual(["https://example.com"]);
        const safe = dom.querySelector('a[href="https://example.com"]');
        expect(safe?.getAttribute("target")).toBe("_blank");
        expect(safe?.getAttribute("rel")).toBe("noopener noreferrer");
        expect(dom.textContent).toContain("text");
    });

    test("KaTeX's MathML survives sanitising", () => {
        const html = renderMarkdown("$x^2$");
        expect(html).toContain("<semantics>");
        expect(html).toMatch(/<annotation[^>]*>x\^2<\/annotation>/);
    });
});
