/** Ranges of every case-insensitive occurrence of `terms` in the text under `root`. */
export function findTermRanges(root: Node, terms: string[]): Range[] {
    const needles = terms.map((term) => term.toLocaleLowerCase()).filter((term) => term !== "");
    const ranges: Range[] = [];
    if (needles.length === 0) return ranges;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node != null; node = walker.nextNode()) {
        const text = (node.textContent ?? "").toLocaleLowerCase();
        for (const needle of needles) {
            for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) {
                const range = document.createRange();
                range.setStart(node, at);
                range.setEnd(node, at + needle.length);
                ranges.push(range);
            }
        }
    }
    return ranges;
}

/** Highlights the ranges with the CSS Custom Highlight API (`::highlight(name)`), replacing the previous ones. */
export function showHighlight(name: string, ranges: Range[]): void {
    if (typeof CSS === "undefined" || !("highlights" in CSS) || typeof Highlight === "undefined") return;
    if (ranges.length === 0) CSS.highlights.delete(name);
    else CSS.highlights.set(name, new Highlight(...ranges));
}
