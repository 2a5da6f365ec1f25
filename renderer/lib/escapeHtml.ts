const entities: Record<string, string> = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"};

/** Text -> HTML text or attribute value. */
export function escapeHtml(text: string): string {
    return text.replace(/[&<>"']/g, (char) => entities[char] ?? char);
}
