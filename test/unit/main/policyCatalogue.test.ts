import {readdirSync, readFileSync} from "node:fs";
import {join, relative} from "node:path";
import ts from "typescript";
import {describe, expect, test} from "vitest";
import {resolveCombine} from "../../../main/engine/policies/decide.js";
import {policies} from "../../../main/engine/policies/index.js";
import type {ScoreNeeds} from "../../../main/engine/policies/types.js";
import {compressionSettingsSchema, defaultCompressionSettings} from "../../../main/services/schemas.js";
import {ponderExtensionSchema} from "../../../main/server/openaiSchemas.js";
import {
    defaultPolicyParams,
    isNumberParam,
    policyCatalogue,
    policyEntry,
    policyIds,
    tunablePolicyIds,
    type NumberParam
} from "../../../preload/policyCatalogue.js";

const root = join(import.meta.dirname, "../../..");
const ids = new Set<string>(policyIds);

/** The catalogue itself, and the engine's registry: an object from each id to its module, which the compiler holds to the catalogue. */
const allowed = new Set(["preload/policyCatalogue.ts", "main/engine/policies/index.ts"]);

/** Where a policy id may be compared: the catalogue and the policy modules. Everywhere else a catalogue property is read. */
const comparesIds = (file: string) => file === "preload/policyCatalogue.ts" || file.startsWith("main/engine/policies/");

function sources(folder: string): string[] {
    return readdirSync(join(root, folder), {recursive: true, encoding: "utf8"})
        .filter((file) => /\.(ts|svelte)$/.test(file) && !file.endsWith(".d.ts"))
        .map((file) => join(folder, file));
}

const isId = (node: ts.Node) => (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && ids.has(node.text);
const nameIsId = (name: ts.PropertyName | undefined) =>
    name != null && (ts.isIdentifier(name) || ts.isStringLiteral(name)) && ids.has(name.text);
const equality = [
    ts.SyntaxKind.EqualsEqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsEqualsToken,
    ts.SyntaxKind.EqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsToken
];
const logical = (node: ts.Node): node is ts.BinaryExpression =>
    ts.isBinaryExpression(node) &&
    (node.operatorToken.kind === ts.SyntaxKind.AmpersandAmpersandToken || node.operatorToken.kind === ts.SyntaxKind.BarBarToken);

/** The node around `node`'s parentheses. */
function outside(node: ts.Node): ts.Node {
    let parent = node.parent;
    while (ts.isParenthesizedExpression(parent)) parent = parent.parent;
    return parent;
}

/** The ids a chain of `&&` / `||` compares a value with (`policy !== "full" && policy !== "trimkv"`). */
function comparedIds(node: ts.Node, found: Set<string>): Set<string> {
    if (logical(node) || ts.isParenthesizedExpression(node)) {
        node.forEachChild((child) => void comparedIds(child, found));
    } else if (ts.isBinaryExpression(node) && equality.includes(node.operatorToken.kind)) {
        for (const side of [node.left, node.right]) if (isId(side)) found.add((side as ts.StringLiteral).text);
    }
    return found;
}

/**
 * Where a piece of code writes two or more policy ids as one list: an array, a union, an enum, a switch, an object's or a
 * type's keys, a chain of comparisons.
 */
function idLists(file: string, code: string): string[] {
    const lists: string[] = [];
    const source = ts.createSourceFile(file, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const report = (node: ts.Node, what: string) =>
        lists.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${what} ${node.getText().slice(0, 80)}`);
    const visit = (node: ts.Node): void => {
        if (ts.isArrayLiteralExpression(node) && node.elements.filter(isId).length >= 2) report(node, "array");
        else if (ts.isUnionTypeNode(node) && node.types.filter((type) => ts.isLiteralTypeNode(type) && isId(type.literal)).length >= 2)
            report(node, "union");
        else if (
            ts.isEnumDeclaration(node) &&
            node.members.filter((member) => member.initializer != null && isId(member.initializer)).length >= 2
        )
            report(node, "enum");
        else if (
            ts.isSwitchStatement(node) &&
            node.caseBlock.clauses.filter((clause) => ts.isCaseClause(clause) && isId(clause.expression)).length >= 2
        )
            report(node, "switch");
        else if (ts.isObjectLiteralExpression(node) && node.properties.filter((property) => nameIsId(property.name)).length >= 2)
            report(node, "object keyed by");
        else if (ts.isTypeLiteralNode(node) && node.members.filter((member) => nameIsId(member.name)).length >= 2)
            report(node, "type keyed by");
        else if (logical(node) && !logical(outside(node)) && comparedIds(node, new Set()).size >= 2) report(node, "comparisons with");
        node.forEachChild(visit);
    };
    visit(source);
    return lists;
}

/**
 * Where a piece of code branches on one policy id: compares a value with it (`===`, `!==`, `==`, `!=`), names it in a
 * `case`, or asks a list whether it `includes` it. Such a branch stands for a property the catalogue should say.
 */
function idComparisons(file: string, code: string): string[] {
    const found: string[] = [];
    const source = ts.createSourceFile(file, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const report = (node: ts.Node, what: string) =>
        found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${what} ${node.getText().slice(0, 80)}`);
    const visit = (node: ts.Node): void => {
        if (ts.isBinaryExpression(node) && equality.includes(node.operatorToken.kind) && (isId(node.left) || isId(node.right)))
            report(node, "comparison");
        else if (ts.isCaseClause(node) && isId(node.expression)) report(node, "case");
        else if (
            ts.isCallExpression(node) &&
            ts.isPropertyAccessExpression(node.expression) &&
            node.expression.name.text === "includes" &&
            (node.arguments.some(isId) ||
                (ts.isArrayLiteralExpression(node.expression.expression) && node.expression.expression.elements.some(isId)))
        )
            report(node, "includes");
        node.forEachChild(visit);
    };
    visit(source);
    return found;
}

/** A Svelte file's scripts, and its markup's expressions in braces, each as code. */
function svelteCode(text: string): string[] {
    const scripts = [...text.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((match) => match[1]!);
    const markup = text.replace(/<script[^>]*>[\s\S]*?<\/script>|<style[^>]*>[\s\S]*?<\/style>/g, "");
    const expressions = [...markup.matchAll(/\{[#:/@]?(?:if|else if|each|const|html|key|await)?\s*([^{}]*)\}/g)].map(
        (match) => `void (${match[1]!.replace(/\sas\s[\s\S]*$/, "")});`
    );
    return [...scripts, ...expressions];
}

/** What `scan` finds in a source file, a Svelte file's scripts and markup expressions each scanned as code. */
function scanFile(file: string, scan: (file: string, code: string) => string[]): string[] {
    const text = readFileSync(join(root, file), "utf8");
    return file.endsWith(".svelte") ? svelteCode(text).flatMap((code) => scan(file, code)) : scan(file, text);
}

describe("the policy catalogue", () => {
    test("is the only place a list of policy ids is written", () => {
        const files = ["main", "preload", "renderer", "native"].flatMap(sources).map((file) => relative(root, join(root, file)));
        expect(files.length).toBeGreaterThan(100);
        const lists = files.filter((file) => !allowed.has(file)).flatMap((file) => scanFile(file, idLists));
        expect(lists).toEqual([]);
    });

    test("is read for what varies by policy: no code outside it and the policy modules compares a policy id", () => {
        const files = ["main", "preload", "renderer"].flatMap(sources).map((file) => relative(root, join(root, file)));
        expect(files.length).toBeGreaterThan(100);
        const branches = files.filter((file) => !comparesIds(file)).flatMap((file) => scanFile(file, idComparisons));
        expect(branches).toEqual([]);
    });

    test("the comparison scan finds each form it looks for", () => {
        const code = [
            `if (policy === "full") x();`,
            `const a = "trimkv" !== settings.policy;`,
            `const b = id == "lava";`,
            `switch (p) { case "lethe": break; }`,
            `const c = list.includes("refreekv");`,
            `const c = ["h2o"].includes(p);`,
            `const d = form?.policy !== "leankv" ? 1 : 2;`
        ];
        expect(code.map((line) => idComparisons("sample.ts", line).length)).toEqual([1, 1, 1, 1, 1, 1, 1]);
        expect(
            idComparisons(
                "sample.ts",
                `const e = {policy: "full"}; f("lethe"); if (key === "fuller" || p === entry.id || ["x"].includes(p)) g();`
            )
        ).toEqual([]);
        expect(
            svelteCode(`<script>const s = p !== "trimkv";</script>{#if form.policy === "lava" && x}y{/if}`).flatMap((code) =>
                idComparisons("s", code)
            )
        ).toHaveLength(2);
    });

    test("the scan finds a list in each form it looks for", () => {
        const code = [
            `const a = ["lethe", "h2o"];`,
            `type B = "full" | "lava";`,
            `enum C {x = "full", y = "trimkv"}`,
            `switch (p) { case "h2o": break; case "lethe": break; }`,
            `const d = {full: 1, leankv: 2};`,
            `type E = {refreekv: 1, "lava": 2};`,
            `const f = p !== "full" && (p !== "streamingllm" || q);`
        ];
        for (const line of code) expect(idLists("sample.ts", line), line).toHaveLength(1);
        expect(
            idLists("sample.ts", `const g = p === "full" && q === "full"; const h = ["full", "other"]; type I = "full" | "half";`)
        ).toEqual([]);
        expect(
            svelteCode(`<script>let a = 1;</script>{#if policy === "lethe" || policy === "h2o"}x{/if}`).flatMap((code) =>
                idLists("s", code)
            )
        ).toHaveLength(1);
    });

    test("the engine registers one module per policy, under its id, with the catalogue's defaults", () => {
        expect(Object.keys(policies).sort()).toEqual([...policyIds].sort());
        for (const id of policyIds) {
            expect(policies[id].id).toBe(id);
            expect(policies[id].defaults).toEqual(Object.fromEntries(policyEntry(id).params.map((param) => [param.key, param.default])));
        }
    });

    test("what each policy reads, as the catalogue says, is what its module asks for", () => {
        for (const id of policyIds) {
            const policy = policies[id] as unknown as {defaults: unknown; needs(params: unknown): ScoreNeeds};
            const needs = policy.needs(policy.defaults);
            expect({scores: needs.scores !== false, gates: needs.retention === true, valueNorms: needs.valueNorms === true}, id).toEqual(
                policyEntry(id).reads
            );
        }
    });

    test("the policies offered per-head cells are those whose module keeps each head's own tokens", () => {
        for (const id of policyIds) expect(policyEntry(id).headCells, id).toBe(policies[id].keepPerHead != null);
        expect(policyIds.filter((id) => policyEntry(id).headCells).sort()).toEqual(["h2o", "lethe", "trimkv"]);
    });

    test("the settings schema takes each parameter's bounds from the catalogue", () => {
        const params = defaultCompressionSettings.params as Record<string, object>;
        const parse = (id: string, key: string, value: unknown) =>
            compressionSettingsSchema.safeParse({...defaultCompressionSettings, params: {...params, [id]: {...params[id], [key]: value}}})
                .success;
        expect(defaultCompressionSettings.params).toEqual(defaultPolicyParams());
        for (const id of tunablePolicyIds) {
            for (const param of policyEntry(id).params) {
                if (!isNumberParam(param)) {
                    for (const option of param.options) expect(parse(id, param.key, option.id)).toBe(true);
                    expect(parse(id, param.key, "neither")).toBe(false);
                    continue;
                }
                const spec: NumberParam = param;
                const inside = (value: number) => `${id}.${spec.key} = ${value}`;
                expect(parse(id, spec.key, spec.min), inside(spec.min)).toBe(!spec.minExclusive);
                expect(parse(id, spec.key, spec.max), inside(spec.max)).toBe(!spec.maxExclusive && (!spec.odd || spec.max % 2 === 1));
                expect(parse(id, spec.key, spec.min - 1), inside(spec.min - 1)).toBe(false);
                expect(parse(id, spec.key, spec.max + 1), inside(spec.max + 1)).toBe(false);
                if (spec.integer) expect(parse(id, spec.key, spec.default + 0.5)).toBe(false);
                if (spec.odd) expect(parse(id, spec.key, spec.default + 1)).toBe(false);
            }
        }
    });

    test("what it says each policy does holds together", () => {
        // One policy keeps every token: Full KV, what Compare with Full KV runs, reading nothing and tuning nothing.
        expect(policyIds.filter((id) => policyEntry(id).keepsEveryToken)).toEqual(["full"]);
        for (const id of policyIds) {
            const entry = policyEntry(id);
            if (entry.keepsEveryToken)
                expect({reads: entry.reads, params: entry.params, afterPrompt: entry.prunesAfterPrompt}).toEqual({
                    reads: {scores: false, gates: false, valueNorms: false},
                    params: [],
                    afterPrompt: false
                });
            // Gates give the combine mode only to a policy that reads them.
            if (entry.ownCombine === "gates") expect(entry.reads.gates, id).toBe(true);
            // Per-head cells are a policy's own mode only where its paper ranks per KV head.
            if (entry.ownCombine === "heads") expect(entry.headCells, id).toBe(true);
            for (const param of entry.params)
                if (!isNumberParam(param)) for (const option of param.options) expect(option.inWords, `${id}.${param.key}`).not.toBe("");
        }
        // The settings' `auto` combine resolves as the catalogue says.
        for (const id of policyIds)
            if (policyEntry(id).ownCombine !== "gates") expect(resolveCombine("auto", id), id).toBe(policyEntry(id).ownCombine);
            else expect(() => resolveCombine("auto", id), id).toThrow(/how its gates were trained/);
        // H2O's own: per-head cells, where the bench measured it ahead of shared cells
        expect(resolveCombine("auto", "h2o")).toBe("heads");
        expect(resolveCombine("aggregate", "h2o")).toBe("aggregate");
    });

    test("the server and the stored records accept exactly the catalogue's ids", () => {
        for (const entry of policyCatalogue) expect(ponderExtensionSchema.safeParse({policy: entry.id}).success).toBe(true);
        expect(ponderExtensionSchema.safeParse({policy: "oracle"}).success).toBe(false);
        expect(compressionSettingsSchema.safeParse({...defaultCompressionSettings, policy: "oracle"}).success).toBe(false);
    });
});
