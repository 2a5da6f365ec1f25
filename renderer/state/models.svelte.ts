import type {
    CalibrationConversations,
    CalibrationStatus,
    EngineStatus,
    GpuLayers,
    ModelDetails,
    ModelInfo,
    PonderApi
} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Models = ReturnType<typeof createModels>;

export type ModelsOptions = {
    /** Called when a model's retention gates were installed (a calibration): what offers TRIM-KV asks again. Defaults to none. */
    onGatesInstalled?: (modelId: string) => void;
};

/** Known models, adding (dialog or typed path), loading, calibrating, and the engine's status. */
export function createModels(bridge: PonderApi, options: ModelsOptions = {}) {
    const state = $state({
        models: [] as ModelInfo[],
        engine: null as EngineStatus | null,
        version: "",
        /** Path typed by hand (always offered; the only way in headless mode, where there is no file dialog). */
        path: "",
        /** `models:pick` answered `null`: no dialog here (headless) or it was cancelled, so point at the path input. */
        pickUnavailable: false,
        adding: false,
        /** The model a `models:load` request is on its way for. */
        loadingId: null as string | null,
        /** The model whose details are shown, and the details fetched so far (by id). */
        detailsId: null as string | null,
        details: {} as Record<string, ModelDetails>,
        detailsError: null as string | null,
        removingId: null as string | null,
        /** The model whose TRIM-KV gates are being converted (`models:convertTrimkv`), and what the last conversion said. */
        convertingId: null as string | null,
        trimkvResult: null as {id: string; text: string; ok: boolean} | null,
        /** The retention calibration running, or the last one's end (`models:calibration` events). */
        calibration: null as CalibrationStatus | null,
        /** Why a calibration could not start (another runs, the model cannot be calibrated), for the model it was asked for. */
        calibrationError: null as {id: string; text: string} | null,
        /** Per model, its own stored conversations a calibration could read (read when its details open). */
        conversations: {} as Record<string, CalibrationConversations>,
        error: null as string | null
    });
    const loadedModel = $derived(state.engine?.model ?? null);
    /** The model whose details are open (the main area shows them instead of the chat), if any. */
    const detailed = $derived(state.models.find((model) => model.id === state.detailsId) ?? null);
    const busy = $derived(state.loadingId != null || state.engine?.state === "loading");

    function upsert(model: ModelInfo): void {
        const index = state.models.findIndex((existing) => existing.id === model.id);
        if (index >= 0) state.models[index] = model;
        else state.models.push(model);
    }

    async function refresh(): Promise<void> {
        const [list, status] = await Promise.all([request(bridge, "models:list", undefined), request(bridge, "app:status", undefined)]);
        if (list.ok) state.models = list.value;
        if (status.ok) {
            state.version = status.value.version;
            state.engine = status.value.engine;
        }
        const failure = !list.ok ? list.error : !status.ok ? status.error : null;
        state.error = failure ? describeError("Could not read the models and engine status", failure) : null;
    }

    /** Registers the GGUF file at `path` (defaults to the typed path). */
    async function add(path: string = state.path): Promise<ModelInfo | null> {
        const trimmed = path.trim();
        if (trimmed === "") {
            state.error = "Enter the path of a .gguf model file";
            return null;
        }
        state.adding = true;
        state.error = null;
        const result = await request(bridge, "models:add", {path: trimmed});
        state.adding = false;
        if (!succeeded(result, state, "Could not add the model")) return null;
        state.path = "";
        state.pickUnavailable = false;
        upsert(result.value);
        return result.value;
    }

    /** Opens the native file dialog and adds the chosen file. */
    async function pick(): Promise<ModelInfo | null> {
        state.error = null;
        const result = await request(bridge, "models:pick", undefined);
        if (!succeeded(result, state, "Could not open the file dialog")) return null;
        if (result.value == null) {
            state.pickUnavailable = true;
            return null;
        }
        return add(result.value);
    }

    async function load(id: string): Promise<boolean> {
        state.loadingId = id;
        state.error = null;
        const result = await request(bridge, "models:load", {id});
        state.loadingId = null;
        if (!succeeded(result, state, "Could not load the model")) return false;
        state.engine = result.value;
        if (result.value.state === "error")
            state.error = `Could not load the model: ${result.value.message ?? "the engine reported an error"}`;
        return result.value.state !== "error";
    }

    /** Shows a model's details (fetched once), or hides them when they are shown already. */
    async function toggleDetails(id: string): Promise<void> {
        if (state.detailsId === id) {
            state.detailsId = null;
            return;
        }
        state.detailsId = id;
        state.detailsError = null;
        state.error = null;
        void request(bridge, "models:calibrationConversations", {id}).then((found) => {
            if (found.ok) state.conversations[id] = found.value;
        });
        if (state.details[id]) return;
        const result = await request(bridge, "models:details", {id});
        if (!result.ok) {
            if (state.detailsId === id) state.detailsError = describeError("Could not read the model's details", result.error);
            return;
        }
        state.details[id] = result.value;
    }

    /** Back to the chat from a model's details. */
    function closeDetails(): void {
        state.detailsId = null;
    }

    /** The engine has this model loaded and ready (it cannot be removed). */
    function isLoaded(id: string): boolean {
        const engine = state.engine;
        return loadedModel?.id === id && (engine?.state === "ready" || engine?.state === "generating");
    }

    /**
     * Sets the GPU layers a model loads with (from its next load), and reads its details again: the fit estimate
     * splits between VRAM and RAM by it.
     */
    async function setGpuLayers(id: string, gpuLayers: GpuLayers): Promise<boolean> {
        const result = await request(bridge, "models:setGpuLayers", {id, gpuLayers});
        if (!result.ok) {
            state.detailsError = describeError("Could not set the GPU layers", result.error);
            return false;
        }
        state.detailsError = null;
        upsert(result.value);
        const details = await request(bridge, "models:details", {id});
        if (details.ok) state.details[id] = details.value;
        return true;
    }

    /**
     * Asks for the TRIM-KV authors' `trimkv_weights.pth` (a file dialog; its `config.json` beside it is used when there),
     * converts it into the model's gates, and reads the model's details again (TRIM-KV is offered once they are there).
     */
    async function getTrimkvGates(id: string): Promise<boolean> {
        state.trimkvResult = null;
        const picked = await request(bridge, "models:pickTrimkv", undefined);
        if (!picked.ok) {
            state.trimkvResult = {id, text: describeError("Could not open the file dialog", picked.error), ok: false};
            return false;
        }
        if (picked.value == null)
            // cancelled, or no dialog here (headless)
            return false;
        state.convertingId = id;
        const result = await request(bridge, "models:convertTrimkv", {
            id,
            weights: picked.value.weights,
            ...(picked.value.config != null ? {config: picked.value.config} : {})
        });
        state.convertingId = null;
        if (!result.ok) {
            state.trimkvResult = {id, text: describeError("Could not get the TRIM-KV gates", result.error), ok: false};
            return false;
        }
        const gates = result.value;
        state.trimkvResult = {
            id,
            ok: true,
            text:
                `Converted ${gates.layers} layers of gates (hidden ${gates.hidden})` +
                (gates.budget != null
                    ? `, trained at a budget of ${gates.budget} cells`
                    : ", trained budget unknown (no config.json beside the weights)") +
                (gates.baseModel != null ? ` for ${gates.baseModel}` : "")
        };
        const details = await request(bridge, "models:details", {id});
        if (details.ok) state.details[id] = details.value;
        return true;
    }

    /**
     * Starts calibrating the model's retention gates, by its thinking or by reading its stored conversations; its progress
     * and end arrive as events.
     */
    async function calibrate(id: string, source: "thinking" | "conversations" = "thinking"): Promise<boolean> {
        state.calibrationError = null;
        const result = await request(bridge, "models:calibrate", source === "thinking" ? {id} : {id, source});
        if (!result.ok) {
            state.calibrationError = {id, text: describeError("Could not calibrate", result.error)};
            return false;
        }
        // an event may have told more meanwhile
        if (state.calibration?.modelId !== id || state.calibration.state !== "running") state.calibration = result.value;
        return true;
    }

    /** Cancels the running calibration (what it thought through is kept for the next one). */
    async function cancelCalibration(): Promise<void> {
        const result = await request(bridge, "models:calibrateCancel", undefined);
        if (!result.ok && state.calibration != null)
            state.calibrationError = {id: state.calibration.modelId, text: describeError("Could not cancel the calibration", result.error)};
    }

    /** Gates were installed for a model by another way (a download of the authors' released gates): its details are read again, and TRIM-KV offered. */
    async function gatesInstalled(id: string): Promise<void> {
        const details = await request(bridge, "models:details", {id});
        if (details.ok) state.details[id] = details.value;
        options.onGatesInstalled?.(id);
    }

    /** Reads the calibration running (or that ended) in the backend: a page opened meanwhile shows it. */
    async function readCalibration(): Promise<void> {
        const result = await request(bridge, "models:calibrationStatus", undefined);
        if (result.ok) state.calibration = result.value;
    }

    async function onCalibration(status: CalibrationStatus): Promise<void> {
        state.calibration = status;
        if (status.state !== "installed" && status.state !== "refused") return;
        // The gates (and their provenance) are read from the model's details; TRIM-KV is offered from now on.
        const details = await request(bridge, "models:details", {id: status.modelId});
        if (details.ok) state.details[status.modelId] = details.value;
        if (status.state === "installed") options.onGatesInstalled?.(status.modelId);
    }

    /** Forgets a model (its file stays on disk). The loaded model cannot be removed. */
    async function remove(id: string): Promise<boolean> {
        state.removingId = id;
        state.error = null;
        const result = await request(bridge, "models:remove", {id});
        state.removingId = null;
        if (!succeeded(result, state, "Could not remove the model")) return false;
        state.models = state.models.filter((model) => model.id !== id);
        delete state.details[id];
        if (state.detailsId === id) state.detailsId = null;
        return true;
    }

    function applyStatus(status: EngineStatus): void {
        state.engine = status;
        // A model that is now ready makes an earlier failure to add or load one old news.
        if (status.state === "ready" && status.model != null && state.loadingId == null) state.error = null;
    }

    /** Forgets the error shown (the person moved on: edited the path, started another action). */
    function clearError(): void {
        state.error = null;
    }

    const offStatus = bridge.on("engine:status", applyStatus);
    const offCalibration = bridge.on("models:calibration", (status) => void onCalibration(status));

    return {
        state,
        /** The model the engine has loaded, if any. */
        get loadedModel() {
            return loadedModel;
        },
        get detailed() {
            return detailed;
        },
        /** Whether a model is being loaded. */
        get busy() {
            return busy;
        },
        isLoaded,
        refresh,
        add,
        pick,
        load,
        toggleDetails,
        closeDetails,
        setGpuLayers,
        getTrimkvGates,
        gatesInstalled,
        calibrate,
        cancelCalibration,
        readCalibration,
        remove,
        upsert,
        clearError,
        dispose(): void {
            offStatus();
            offCalibration();
        }
    };
}
