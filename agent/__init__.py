"""Chat messages with images, subjects and policy backends; the prompts they carry come from env.prompts and the code in a reply is found by env.gate.extract_sketch."""
