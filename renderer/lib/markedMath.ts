import katex from "katex";
import type {MarkedExtension, Tokens} from "marked";
import {escapeHtml} from "./escapeHtml.js";

type MathToken = Tokens.Generic & {text: string; display: boolean};

/** TeX -> KaTeX HTML + MathML. KaTeX escapes what it renders; `trust: false` refuses `\href`, `\url`, `\htmlClass`... */
function renderTex(tex: string, display: boolean): string {
    try {
        return katex.renderToString(tex, {
            displayMode: display,
            throwOnError: false,
            output: "htmlAndMathml",
            strict: "ignore",
            trust: false,
            maxExpand: 500,
            maxSize: 50
        });
    } catch {
        return `<code class="math-error">${escapeHtml(tex)}</code>`;
    }
}

// Display math opening a block: $$...$$ or \[...\], possibly over several lines.
const blockRule = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n+|$)/;
// Inline: $$...$$ and \[...\] (display), \(...\) and $...$. A `$` opens only before a non-space and closes only after
// one and before a non-digit, so prices ("$5 and $10") stay text.
const inlineRules: [RegExp, boolean][] = [
    [/^\$\$([^\n]+?)\$\$/, true],
    [/^\\\[([\s\S]+?)\\\]/, true],
    [/^\\\(([\s\S]+?)\\\)/, false],
    [/^\$(?![\s$])((?:\\.|[^\\$\n])+?)(?<!\s)\$(?!\d)/, false]
];

/** A marked extension rendering `$...$`, `$$...$$`, `\(...\)` and `\[...\]` with KaTeX. */
export function markedMath(): MarkedExtension {
    return {
        extensions: [
            {
                name: "blockMath",
                level: "block",
                start: (src: string) => src.match(/^ {0,3}(?:\$\$|\\\[)/m)?.index,
                tokenizer(src: string): MathToken | undefined {
                    const match = blockRule.exec(src);
                    const tex = match?.[1] ?? match?.[2];
                    if (match && tex?.trim()) return {type: "blockMath", raw: match[0], text: tex.trim(), display: true};
                    return undefined;
                },
                renderer: (token) => `<div class="math-block">${renderTex(token.text as string, true)}</div>\n`
            },
            {
                name: "inlineMath",
                level: "inline",
                start: (src: string) => {
                    const index = src.search(/\$|\\[([]/);
                    return index < 0 ? undefined : index;
                },
                tokenizer(src: string): MathToken | undefined {
                    for (const [rule, display] of inlineRules) {
                        const match = rule.exec(src);
                        if (match?.[1]?.trim()) return {type: "inlineMath", raw: match[0], text: match[1].trim(), display};
                    }
                    return undefined;
                },
                renderer: (token) => renderTex(token.text as string, token.display as boolean)
            }
        ]
    };
}
