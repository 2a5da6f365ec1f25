import type {JobPrompts} from "./jobPrompts.js";
import type {PromptSet} from "./prompts.js";
import type {WrittenText} from "./writtenTexts.js";

/**
 * The prompts of a calibration from written text: the first `count` texts are read, the last `heldOut` held out (their
 * first questions are the validation's prompts).
 */
export function writtenPrompts(set: PromptSet, texts: WrittenText[], count: number, heldOut: number): JobPrompts {
    const asPrompt = (text: WrittenText, seed: number) => ({kind: set, user: text.turns[0]!.user, seed});
    return {
        set,
        prompts: texts.slice(0, count).map(asPrompt),
        heldOut: texts.slice(texts.length - heldOut).map((text, i) => asPrompt(text, texts.length - heldOut + i))
    };
}
