// A person's own calibration prompts, from a file (`npm run calibrate -- --prompts-file`), as llama.cpp's imatrix
// reads its calibration text from one: JSON Lines (each line a JSON string, or an object with a `prompt` or `user`
// string) or plain text (each non-empty line a prompt).

/** Most prompts a file may hold, and most characters per prompt. */
export const promptsFileLimits = {prompts: 10_000, characters: 32_768};

/** The prompts of a prompts file's text, in order; a malformed or oversized one is refused with its line number. */
export function parsePromptsFile(text: string): string[] {
    const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
    const first = lines.find((line) => line.trim() !== "")?.trim() ?? "";
    const json = first.startsWith('"') || first.startsWith("{");
    const prompts: string[] = [];
    for (const [index, line] of lines.entries()) {
        if (line.trim() === "") continue;
        const prompt = json ? jsonPrompt(line, index + 1) : line.trim();
        if (prompt.trim() === "") throw new Error(`line ${index + 1}: an empty prompt`);
        if (prompt.length > promptsFileLimits.characters)
            throw new Error(`line ${index + 1}: a prompt of ${prompt.length} characters, more than ${promptsFileLimits.characters}`);
        prompts.push(prompt);
        if (prompts.length > promptsFileLimits.prompts) throw new Error(`more than ${promptsFileLimits.prompts} prompts`);
    }
    if (prompts.length === 0) throw new Error("no prompts in the file");
    return prompts;
}

function jsonPrompt(line: string, number: number): string {
    let value: unknown;
    try {
        value = JSON.parse(line);
    } catch {
        throw new Error(`line ${number}: not JSON (a JSON Lines file has one JSON string or object per line)`);
    }
    if (typeof value === "string") return value;
    const object = value as {prompt?: unknown; user?: unknown} | null;
    const prompt = typeof value === "object" && object != null && !Array.isArray(value) ? (object.prompt ?? object.user) : undefined;
    if (typeof prompt !== "string") throw new Error(`line ${number}: neither a string nor an object with a "prompt" string`);
    return prompt;
}
