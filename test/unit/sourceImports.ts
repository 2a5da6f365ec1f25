import fs from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "../..");

/**
 * One import of a source file: the module it names; `target`, the file a relative one names (from the repository's root,
 * `.js` read as the `.ts` it is compiled from), else `null`; `typeOnly`, whether the compiler erases it (`import type`,
 * `export type`): nothing of the target runs.
 */
export type SourceImport = {spec: string; target: string | null; typeOnly: boolean};

function sourceFiles(dir: string): string[] {
    return fs.readdirSync(path.join(root, dir), {withFileTypes: true}).flatMap((entry) => {
        const rel = path.join(dir, entry.name);
        if (entry.isDirectory()) return sourceFiles(rel);
        return /\.(ts|svelte)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [rel] : [];
    });
}

/**
 * The `.ts` and `.svelte` files under the folders (paths from the repository's root; folders that do not exist are
 * skipped), each with its imports: static ones, re-exports (`export ... from`) and dynamic `import()`.
 */
export function sourceImports(dirs: readonly string[]): Map<string, SourceImport[]> {
    const files = dirs.filter((dir) => fs.existsSync(path.join(root, dir))).flatMap(sourceFiles);
    return new Map(
        files.map((file) => {
            const text = fs.readFileSync(path.join(root, file), "utf8");
            const imports = [
                ...text.matchAll(/(?:^|\n)\s*(?:import|export)\s(type\s)?[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)
            ].map((match): SourceImport => {
                const spec = match[2] ?? match[3]!;
                const target = spec.startsWith(".") ? path.join(path.dirname(file), spec).replace(/\.js$/, ".ts") : null;
                return {spec, target, typeOnly: match[1] != null};
            });
            return [file, imports];
        })
    );
}
