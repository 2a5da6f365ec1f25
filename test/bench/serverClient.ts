// The benchmark's API client, in its own process as any program calling the server is: it streams one chat
// completion per message from its parent and reports when the first and the last tokens arrived.
import OpenAI from "openai";

export type ClientRequest = {baseURL: string; model: string; system: string; question: string; maxTokens: number};
export type ClientTiming = {firstTokenMs: number; lastTokenMs: number; tokens: number};

async function timeRequest(request: ClientRequest): Promise<ClientTiming> {
    const client = new OpenAI({baseURL: request.baseURL, apiKey: "local", maxRetries: 0});
    const started = performance.now();
    let first: number | null = null;
    let last = started;
    let tokens = 0;
    const stream = await client.chat.completions.create({
        model: request.model,
        temperature: 0,
        max_tokens: request.maxTokens,
        stream: true,
        stream_options: {include_usage: true},
        messages: [
            {role: "system", content: request.system},
            {role: "user", content: request.question}
        ]
    });
    for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as {content?: string; reasoning_content?: string} | undefined;
        if (delta?.content != null || delta?.reasoning_content != null) {
            last = performance.now();
            first ??= last;
        }
        if (chunk.usage != null) tokens = chunk.usage.completion_tokens;
    }
    return {firstTokenMs: (first ?? last) - started, lastTokenMs: last - started, tokens};
}

process.on("message", (request: ClientRequest) => {
    // A failed request ends the client; the parent reports the exit.
    timeRequest(request).then(
        (timing) => process.send!(timing),
        (error: unknown) => {
            console.error(error);
            process.exit(1);
        }
    );
});
