// Trace files of texts already written: JSON Lines of {prompt, response} or of chat messages, the thought taken from
// `reasoning_content` or from a leading <think> block; anything else refused with its line number.
import {describe, expect, test} from "vitest";
import {parseTraceFile, splitThought, traceFileLimits} from "../../../../main/engine/calibration/writtenTexts.js";

const line = (value: unknown) => JSON.stringify(value);

describe("parseTraceFile", () => {
    test("prompt and response, the thought inside <think>", () => {
        const texts = parseTraceFile(line({prompt: "2+2?", response: "<think>\ntwo and two\n</think>\n\n4"}) + "\n\n");
        expect(texts).toEqual([{system: "", turns: [{user: "2+2?", thought: "two and two", answer: "4"}]}]);
    });

    test("prompt and response with a separate reasoning_content and a system prompt", () => {
        const texts = parseTraceFile(line({system: "Be brief.", prompt: "q", response: "a", reasoning_content: " r "}));
        expect(texts).toEqual([{system: "Be brief.", turns: [{user: "q", thought: "r", answer: "a"}]}]);
    });

    test("chat messages, several exchanges, content as a list of text parts", () => {
        const texts = parseTraceFile(
            line({
                messages: [
                    {role: "system", content: "sys"},
                    {role: "user", content: "first"},
                    {role: "assistant", content: "one", reasoning_content: "thinking 1"},
                    {
                        role: "user",
                        content: [
                            {type: "text", text: "sec"},
                            {type: "text", text: "ond"}
                        ]
                    },
                    {role: "assistant", content: "<think>thinking 2</think>two"}
                ]
            })
        );
        expect(texts).toEqual([
            {
                system: "sys",
                turns: [
                    {user: "first", thought: "thinking 1", answer: "one"},
                    {user: "second", thought: "thinking 2", answer: "two"}
                ]
            }
        ]);
    });

    test("a user message left unanswered at the end is not an exchange", () => {
        const texts = parseTraceFile(
            line({
                messages: [
                    {role: "user", content: "q"},
                    {role: "assistant", content: "a"},
                    {role: "user", content: "unanswered"}
                ]
            })
        );
        expect(texts[0]!.turns).toEqual([{user: "q", thought: "", answer: "a"}]);
    });

    test.each([
        ["not JSON", "{oops", /line 1: not JSON/],
        ["an array", "[1, 2]", /line 1: not an object/],
        ["neither shape", line({text: "x"}), /line 1: neither "prompt" and "response" strings nor a "messages" list/],
        ["a message without a role", line({messages: [{content: "x"}]}), /line 1: message 1 has no role/],
        ["an unknown role", line({messages: [{role: "tool", content: "x"}]}), /role "tool"/],
        [
            "two user messages in a row",
            line({
                messages: [
                    {role: "user", content: "a"},
                    {role: "user", content: "b"}
                ]
            }),
            /two user messages/
        ],
        ["an answer without a question", line({messages: [{role: "assistant", content: "a"}]}), /without a user message/],
        ["no exchange", line({messages: [{role: "user", content: "a"}]}), /no assistant message answers/],
        ["content that is not text", line({messages: [{role: "user", content: {a: 1}}]}), /no text content/],
        ["an empty file", "\n \n", /no texts in the file/]
    ])("refuses %s", (_, content, message) => {
        expect(() => parseTraceFile(content)).toThrow(message);
    });

    test("the line number of a bad line after good ones", () => {
        const good = line({prompt: "q", response: "a"});
        expect(() => parseTraceFile(`${good}\n\n${good}\nnope`)).toThrow(/^line 4: /);
    });

    test("a line longer than the limit is refused", () => {
        const long = line({prompt: "q", response: "x".repeat(traceFileLimits.characters)});
        expect(() => parseTraceFile(long)).toThrow(/line 1: \d+ characters, more than/);
    });
});

describe("splitThought", () => {
    test("a response without a thought is all answer", () => {
        expect(splitThought("  just this ", null)).toEqual({thought: "", answer: "just this"});
    });

    test("only a leading <think> block is the thought", () => {
        expect(splitThought("answer <think>x</think>", null)).toEqual({thought: "", answer: "answer <think>x</think>"});
    });
});
