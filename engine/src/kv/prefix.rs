//! Prefix cache: full KV blocks indexed by a chained hash of their token ids, scoped by tenant,
//! with LRU eviction (vLLM's automatic prefix caching). The cache holds one reference on each
//! block it indexes; a hit shares the block with the new sequence. Only full blocks are cached,
//! and a sequence never writes into a full block again, so shared blocks stay immutable.
//! Entries keep their tokens, so a hash collision can never serve the wrong KV.

use super::BlockManager;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Chained block hash: `h_i = H(h_{i-1}, tokens of block i)`, seeded by the tenant.
pub fn chain_hashes(tenant: &str, tokens: &[u32], block_size: usize) -> Vec<u64> {
    let mut prev = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tenant.hash(&mut h);
        h.finish()
    };
    tokens
        .chunks_exact(block_size)
        .map(|blk| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            prev.hash(&mut h);
            blk.hash(&mut h);
            prev = h.finish();
            prev
        })
        .collect()
}

struct Entry {
    block: u32,
    tokens: Vec<u32>,
    last_used: u64,
}

/// The index from chained hash to cached block.
#[derive(Default)]
pub struct PrefixCache {
    map: HashMap<u64, Entry>,
    clock: u64,
}

impl PrefixCache {
    /// Cached blocks for the longest run of `hashes` (with matching `tokens`) from the start. The
    /// caller receives one new reference on each returned block.
    pub fn lookup(
        &mut self,
        bm: &mut BlockManager,
        hashes: &[u64],
        tokens: &[u32],
        block_size: usize,
    ) -> Vec<u32> {
        self.clock += 1;
        let mut hits = Vec::new();
        for (i, h) in hashes.iter().enumerate() {
            match self.map.get_mut(h) {
                Some(e) if e.tokens == tokens[i * block_size..(i + 1) * block_size] => {
                    e.last_used = self.clock;
                    bm.retain(e.block);
                    hits.push(e.block);
                }
                _ => break,
            }
        }
        hits
    }

    /// Indexes `block` (full, holding `tokens`) under `hash` unless already present; the cache
    /// takes its own reference.
    pub fn insert(&mut self, bm: &mut BlockManager, hash: u64, block: u32, tokens: &[u32]) {
        self.clock += 1;
        if let Some(e) = self.map.get_mut(&hash) {
            e.last_used = self.clock;
            return;
        }
        bm.retain(block);
        self.map.insert(
            hash,
            Entry {
                block,
                tokens: tokens.to_vec(),
                last_used: self.clock,
            },
        );
    }

    /// Frees up to `need` blocks by dropping least-recently-used entries that no sequence
    /// references. Returns how many blocks it freed.
    pub fn evict(&mut self, bm: &mut BlockManager, need: usize) -> usize {
        let mut idle: Vec<(u64, u64)> = self
            .map
            .iter()
            .filter(|(_, e)| bm.refcount(e.block) == 1)
            .map(|(&h, e)| (e.last_used, h))
            .collect();
        idle.sort_unstable();
        let mut freed = 0;
        for (_, h) in idle.into_iter().take(need) {
            let e = self.map.remove(&h).expect("listed");
            bm.release(e.block);
            freed += 1;
        }
        freed
    }

    /// Indexed blocks that no sequence references (held only by the cache, evictable).
    pub fn idle_blocks(&self, bm: &BlockManager) -> usize {
        self.map
            .values()
            .filter(|e| bm.refcount(e.block) == 1)
            .count()
    }

    /// Indexed blocks.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_prefix_and_tenant_scoped_and_evictable() {
        let mut bm = BlockManager::new(8, 2);
        let mut pc = PrefixCache::default();
        let toks = [1, 2, 3, 4, 5, 6];
        let h = chain_hashes("a", &toks, 2);
        assert_eq!(h.len(), 3);
        let blocks: Vec<u32> = (0..3).map(|_| bm.allocate().unwrap()).collect();
        for i in 0..3 {
            pc.insert(&mut bm, h[i], blocks[i], &toks[2 * i..2 * i + 2]);
        }
        // Another tenant, or a different first block, misses everything.
        assert!(pc
            .lookup(&mut bm, &chain_hashes("b", &toks, 2), &toks, 2)
            .is_empty());
        let other = [9, 9, 3, 4];
        assert!(pc
            .lookup(&mut bm, &chain_hashes("a", &other, 2), &other, 2)
            .is_empty());
        // A shared first two blocks hit two.
        let partial = [1, 2, 3, 4, 7, 7];
        let hit = pc.lookup(&mut bm, &chain_hashes("a", &partial, 2), &partial, 2);
        assert_eq!(hit, blocks[..2].to_vec());
        assert_eq!(bm.refcount(blocks[0]), 3, "owner + cache + hit");
        // Entries in use cannot be evicted; idle ones can.
        for b in &blocks {
            bm.release(*b); // the original owner finishes
        }
        for b in &hit {
            bm.release(*b); // the hitting sequence finishes
        }
        let free_before = bm.free_blocks();
        assert_eq!(pc.evict(&mut bm, 10), 3);
        assert_eq!(bm.free_blocks(), free_before + 3);
        assert!(pc.is_empty());
    }
}
