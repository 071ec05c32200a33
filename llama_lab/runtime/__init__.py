"""Where and how live runs execute: devices, precision, the memory guard, GPU data sheets, the
device's peak FLOP/s, and the per-process job slot."""
