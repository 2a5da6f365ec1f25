/** Offers `content` as a download named `fileName` (a Blob behind a temporary `<a download>`). */
export function saveFile({fileName, mimeType, content}: {fileName: string; mimeType: string; content: string}): void {
    const url = URL.createObjectURL(new Blob([content], {type: mimeType}));
    const link = document.createElement("a");
    link.href = url;
    link.download = fileName;
    link.style.display = "none";
    document.body.append(link);
    link.click();
    link.remove();
    // Revoked later: some engines read the blob after click() returns.
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
