//! `[fleet]`: what the daemon keeps free on the host before it starts another agent.

use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

/// `[fleet]`: admission by memory. A new session, an unpark or a cron run waits
/// (`queued`) while the host's available memory is below either bar; 0 turns a bar off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// MiB of the host's memory to keep available (`MemAvailable`): an agent starts only
    /// above it. 0: no bar.
    pub min_free_mb: u64,
    /// The same as a percentage of the host's memory (0 to 100). 0: no bar.
    #[schemars(range(max = 100))]
    pub min_free_percent: u8,
    /// While a session waits for memory, park the contained sessions (sandbox, ssh,
    /// podman) that are idle with nothing open, to make room; the next prompt brings
    /// each back. Off: only memory freed otherwise lets the queue go on.
    pub park_idle: bool,
}

impl FleetConfig {
    /// The bytes to keep available on a host with `total` bytes of memory: the higher of
    /// the two bars, or `None` when neither is set.
    pub fn min_free_bytes(&self, total: u64) -> Option<u64> {
        let by_size = self.min_free_mb.saturating_mul(MIB);
        let by_share = total / 100 * u64::from(self.min_free_percent.min(100));
        let bar = by_size.max(by_share);
        (bar > 0).then_some(bar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_is_the_higher_of_the_two_and_none_when_both_are_off() {
        let total = 16 * 1024 * MIB;
        assert_eq!(FleetConfig::default().min_free_bytes(total), None);
        let both = FleetConfig {
            min_free_mb: 1024,
            min_free_percent: 10,
            ..Default::default()
        };
        assert_eq!(both.min_free_bytes(total), Some(total / 100 * 10));
        let size = FleetConfig {
            min_free_mb: 4096,
            ..Default::default()
        };
        assert_eq!(size.min_free_bytes(total), Some(4096 * MIB));
    }
}
