const allowedProtocols = new Set(["http:", "https:", "mailto:"]);

/**
 * The normalised URL when a link from model output may be followed (absolute `http`, `https` or `mailto`), otherwise
 * `null`: `javascript:`, `data:`, `file:`, relative paths and anything unparsable are refused.
 */
export function safeUrl(href: string): string | null {
    let url: URL;
    try {
        // The URL parser drops tabs and newlines and lowercases the scheme, so "JaVa\tScRiPt:" is seen as what it is.
        url = new URL(href.trim());
    } catch {
        return null;
    }
    return allowedProtocols.has(url.protocol) ? url.href : null;
}
