export type ThemeColors = {
    text: string;
    muted: string;
    faint: string;
    border: string;
    background: string;
    subtle: string;
    accent: string;
    accentSoft: string;
    warning: string;
    success: string;
};

/** The theme's colours (CSS variables on <html>) for what a canvas draws; read again when the theme changes. */
export function readThemeColors(): ThemeColors {
    const style = getComputedStyle(document.documentElement);
    const read = (name: string) => style.getPropertyValue(name).trim();
    return {
        text: read("--text"),
        muted: read("--text-muted"),
        faint: read("--text-faint"),
        border: read("--border"),
        background: read("--bg-elevated"),
        subtle: read("--bg-subtle"),
        accent: read("--accent"),
        accentSoft: read("--accent-soft"),
        warning: read("--warning"),
        success: read("--success")
    };
}
