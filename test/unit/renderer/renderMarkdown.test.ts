import {describe, expect, test} from "vitest";
import {renderMarkdown} from "../../../renderer/lib/renderMarkdown.js";

// Node has no DOM, so DOMPurify passes these through: what is checked here is the first layer (marked's renderer),
// which must be safe on its own.
const tags = (html: string) => [...html.matchAll(/<([a-z][\w-]*)([^>]*)>/gi)]
    .map((match) => ({name: match[1]!.toLowerCase(), attributes: match[2]!}));

describe("renderMarkdown", () => {
    test("raw HTML never survives as HTML: scripts and event handlers are inert text", () => {
        for (const payload of [
            "Hi <script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "<div onclick=\"steal()\">\nblock html\n</div>",
            "<iframe src=\"https://evil.example\"></iframe>",
            "<a href=\"javascript:alert(1)\">x</a>"
        ]) {
            const html = renderMarkdown(payload);
            const names = tags(html).map((tag) => tag.name);
            expect(names.filter((name) => !["p", "a"].includes(name))).toEqual([]);
            expect(tags(html).some((tag) => /\son\w+\s*=/i.test(tag.attributes))).toBe(false);
            expect(html).not.toMatch(/href="javascript:/i);
        }
        expect(renderMarkdown("<script>alert(1)</script>")).toContain("&lt;script&gt;");
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
        expect(html).toContain("<a href=\"https://example.com/a?b=1\" target=\"_blank\" rel=\"noopener noreferrer\">the docs</a>");
        expect(html).toMatch(/<a href="mailto:me@example.com" target="_blank" rel="noopener noreferrer">/);
    });

    test("images become links instead of loading anything", () => {
        const html = renderMarkdown("![a cat](https://example.com/cat.png)");
        expect(html).not.toContain("<img");
        expect(html).toContain("[image: a cat]");
    });

    test("code is highlighted and escaped", () => {
        const html = renderMarkdown("```ts\nconst answer: number = 42; // <b>\n```");
        expect(html).toContain("<span class=\"hljs-keyword\">const</span>");
        expect(html).toContain("class=\"hljs language-ts\"");
        expect(html).toContain("&lt;b&gt;");
        expect(html).toContain("data-copy-code");
        const plain = renderMarkdown("```\n<script>alert(1)</script>\n```");
        expect(plain).toContain("&lt;script&gt;");
        expect(plain).not.toContain("<script");
    });

    test("$x^2$ renders KaTeX inline, $$...$$ as a display block", () => {
        const inline = renderMarkdown("The area is $x^2$.");
        expect(inline).toContain("class=\"katex\"");
        expect(inline).toContain("<msup><mi>x</mi><mn>2</mn></msup>");
        expect(inline).not.toContain("$x^2$");

        const display = renderMarkdown("$$\n\\frac{a}{b}\n$$");
        expect(display).toContain("class=\"math-block\"");
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
});
