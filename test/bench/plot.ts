import fs from "node:fs/promises";
import * as vega from "vega";
import {compile, type TopLevelSpec} from "vega-lite";

/** A line chart (one line per series) written as SVG with Vega-Lite. */
export async function writeLineChart(
    file: string,
    options: {
        title: string;
        x: string;
        y: string;
        rows: {x: number; y: number; series: string}[];
        logY?: boolean;
    }
): Promise<void> {
    const spec: TopLevelSpec = {
        $schema: "https://vega.github.io/schema/vega-lite/v6.json",
        title: options.title,
        width: 560,
        height: 320,
        background: "white",
        data: {values: options.rows},
        mark: {type: "line", point: true},
        encoding: {
            x: {field: "x", type: "quantitative", title: options.x},
            y: {field: "y", type: "quantitative", title: options.y, scale: options.logY === true ? {type: "log"} : {zero: true}},
            color: {field: "series", type: "nominal", title: null}
        }
    };
    const view = new vega.View(vega.parse(compile(spec).spec), {renderer: "none"});
    await fs.writeFile(file, await view.toSVG());
    view.finalize();
}

/** A grouped bar chart written as SVG. */
export async function writeBarChart(
    file: string,
    options: {
        title: string;
        x: string;
        y: string;
        rows: {group: string; series: string; y: number}[];
    }
): Promise<void> {
    const spec: TopLevelSpec = {
        $schema: "https://vega.github.io/schema/vega-lite/v6.json",
        title: options.title,
        width: 560,
        height: 300,
        background: "white",
        data: {values: options.rows},
        mark: "bar",
        encoding: {
            x: {field: "group", type: "nominal", title: options.x},
            xOffset: {field: "series"},
            y: {field: "y", type: "quantitative", title: options.y},
            color: {field: "series", type: "nominal", title: null}
        }
    };
    const view = new vega.View(vega.parse(compile(spec).spec), {renderer: "none"});
    await fs.writeFile(file, await view.toSVG());
    view.finalize();
}

/** A Markdown table. */
export function table(headers: string[], rows: (string | number)[][]): string {
    const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
    return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}
