// Lists the exports that no other file uses: `tsx scripts/unusedExports.ts`. Each named export of the TypeScript and
// JavaScript sources is looked up with the TypeScript language service over main/, preload/, renderer/ (the scripts of
// .svelte files included), native/, scripts/ and test/; one whose references all lie in its own file is printed,
// marked "signature" when another export of the file shows it to its users (an options type, a return type), "own
// file" when the file uses it otherwise and "unused" when nothing does. A .mjs file with a .d.mts beside it is
// checked through its declarations. Default exports are left out (the tools
// that load config files and entry points use them).
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

const root = path.resolve(import.meta.dirname, "..");
const folders = ["main", "preload", "renderer", "native", "scripts", "test"];
const skipped = /(^|\/)(node_modules|out|patches|results)\/|\.d\.m?ts$/;
/** The config files at the root, which import from the folders above. */
const rootFiles = ["electron.vite.config.ts", "vitest.config.ts"].map((file) => path.join(root, file));

function sourceFiles(dir: string): string[] {
    return fs.readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
        const file = path.join(dir, entry.name);
        if (skipped.test(path.relative(root, file) + (entry.isDirectory() ? "/" : ""))) return [];
        if (entry.isDirectory()) return sourceFiles(file);
        return /\.(ts|mts|mjs|svelte)$/.test(entry.name) ? [file] : [];
    });
}

/** A .svelte file's `<script>` blocks, as a TypeScript file beside it (so that its relative imports resolve). */
const svelteScripts = new Map<string, string>();
const files = [...rootFiles, ...folders.flatMap((folder) => sourceFiles(path.join(root, folder)))].map((file) => {
    if (!file.endsWith(".svelte")) return file;
    const text = fs.readFileSync(file, "utf8");
    const scripts = [...text.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((match) => match[1]).join("\n");
    svelteScripts.set(`${file}.script.ts`, scripts);
    return `${file}.script.ts`;
});

const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    allowJs: true,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"]
};
const host: ts.LanguageServiceHost = {
    getScriptFileNames: () => files,
    getScriptVersion: () => "1",
    getScriptSnapshot: (file) => {
        const text = svelteScripts.get(file) ?? (fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined);
        return text === undefined ? undefined : ts.ScriptSnapshot.fromString(text);
    },
    getCurrentDirectory: () => root,
    getCompilationSettings: () => options,
    getDefaultLibFileName: ts.getDefaultLibFilePath,
    fileExists: (file) => svelteScripts.has(file) || ts.sys.fileExists(file),
    readFile: (file) => svelteScripts.get(file) ?? ts.sys.readFile(file),
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories
};
const service = ts.createLanguageService(host);
const program = service.getProgram()!;

/** The name nodes of a file's own named exports (declarations and `export {a, b}` lists without `from`). */
function exportedNames(source: ts.SourceFile): ts.Identifier[] {
    const names: ts.Identifier[] = [];
    for (const statement of source.statements) {
        if (ts.isExportDeclaration(statement)) {
            if (!statement.moduleSpecifier && statement.exportClause && ts.isNamedExports(statement.exportClause))
                names.push(...statement.exportClause.elements.map((element) => element.name).filter(ts.isIdentifier));
            continue;
        }
        const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
        if (
            !modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword) ||
            modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.DefaultKeyword)
        )
            continue;
        if (ts.isVariableStatement(statement))
            names.push(...statement.declarationList.declarations.map((declaration) => declaration.name).filter(ts.isIdentifier));
        else if (
            (ts.isFunctionDeclaration(statement) ||
                ts.isClassDeclaration(statement) ||
                ts.isInterfaceDeclaration(statement) ||
                ts.isTypeAliasDeclaration(statement) ||
                ts.isEnumDeclaration(statement)) &&
            statement.name
        )
            names.push(statement.name);
    }
    return names;
}

/** The innermost node at `position`. */
function nodeAt(source: ts.SourceFile, position: number): ts.Node {
    let node: ts.Node = source;
    for (;;) {
        const child = node.getChildren(source).find((candidate) => candidate.getStart(source) <= position && position < candidate.getEnd());
        if (!child) return node;
        node = child;
    }
}

/**
 * Whether the reference at `position` is part of what another export of the file shows its users: a type in the
 * signature of an exported function, class member, type or constant (not a body, not a constant's value).
 */
function inExportedSignature(source: ts.SourceFile, position: number, own: ts.Identifier): boolean {
    let node = nodeAt(source, position);
    for (; node.parent && node.parent !== source; node = node.parent) {
        if (
            ts.isBlock(node) ||
            (ts.isVariableDeclaration(node.parent) && node.parent.initializer === node) ||
            (ts.isArrowFunction(node.parent) && node.parent.body === node) ||
            (ts.isPropertyDeclaration(node.parent) && node.parent.initializer === node)
        )
            return false;
    }
    const modifiers = ts.canHaveModifiers(node) ? (ts.getModifiers(node) ?? []) : [];
    return (
        node.getStart(source) !== own.getStart(source) &&
        !(own.getStart(source) >= node.getStart(source) && own.getEnd() <= node.getEnd()) &&
        modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)
    );
}

const found: {file: string; line: number; name: string; kind: "own file" | "signature" | "unused"}[] = [];
for (const file of files.filter(
    (name) =>
        !svelteScripts.has(name) && !rootFiles.includes(name) && !(name.endsWith(".mjs") && fs.existsSync(name.replace(/\.mjs$/, ".d.mts")))
)) {
    const source = program.getSourceFile(file);
    if (!source) continue;
    for (const name of exportedNames(source)) {
        const references = (service.findReferences(file, name.getStart(source)) ?? []).flatMap((symbol) => symbol.references);
        if (references.some((reference) => reference.fileName !== file)) continue;
        const uses = references.filter((reference) => !reference.isDefinition);
        found.push({
            file: path.relative(root, file),
            line: source.getLineAndCharacterOfPosition(name.getStart(source)).line + 1,
            name: name.text,
            kind:
                uses.length === 0
                    ? "unused"
                    : uses.some((use) => inExportedSignature(source, use.textSpan.start, name))
                      ? "signature"
                      : "own file"
        });
    }
}
for (const entry of found) console.log(`${entry.file}:${entry.line}\t${entry.name}\t${entry.kind}`);
const count = (kind: string) => found.filter((entry) => entry.kind === kind).length;
console.log(
    `${found.length} exports used by no other file: ${count("own file")} used only inside their own file, ${count("signature")} shown in ` +
        `the signature of another export of their file, ${count("unused")} unused`
);
