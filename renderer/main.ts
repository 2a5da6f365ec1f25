import "katex/dist/katex.min.css";
import "./styles/app.css";
import "./styles/panels.css";
import "./styles/markdown.css";
import {mount} from "svelte";
import App from "./App.svelte";
import {getBridge} from "./lib/bridge.js";
import {createPonder} from "./state/ponder.svelte.js";

const target = document.getElementById("app");
if (!target) throw new Error("Ponder's root element #app is missing");

const ponder = createPonder(getBridge());
mount(App, {target, props: {ponder}});
