-- The GPU layers each model loads with: 'auto' (node-llama-cpp fits them to free VRAM), 'max', or a count.
ALTER TABLE models ADD COLUMN gpu_layers TEXT NOT NULL DEFAULT 'auto';
