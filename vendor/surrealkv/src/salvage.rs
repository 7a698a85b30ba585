//! Crucible's additions (see crucible's vendor/README.md): reading every block of the
//! table files a database's manifest lists, to name what no longer reads back as written;
//! and rebuilding a damaged manifest from the table files themselves.

use std::fs::File as SysFile;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};

use crate::batch::Batch;
use crate::error::{BackgroundErrorHandler, Error, Result};
use crate::levels::{write_manifest_to_disk, Level, LevelManifest, Levels, MANIFEST_FORMAT_VERSION_V1};
use crate::lockfile::LockFile;
use crate::sstable::block::BlockHandle;
use crate::sstable::table::{check_block, IndexType, Table};
use crate::vfs::File;
use crate::wal::reader::Reader;
use crate::wal::{list_segment_ids, segment_name};
use crate::Options;

/// The trees open in this process, by path, to answer [`compaction_halted`].
static TREES: Mutex<Vec<(PathBuf, Weak<BackgroundErrorHandler>)>> = Mutex::new(Vec::new());

/// Remembers the tree opened at `path` (the latest one there).
pub(crate) fn register(path: &Path, handler: &Arc<BackgroundErrorHandler>) {
	let mut trees = TREES.lock().unwrap_or_else(|e| e.into_inner());
	trees.retain(|(p, h)| p != path && h.strong_count() > 0);
	trees.push((path.to_path_buf(), Arc::downgrade(handler)));
}

/// Why the tree open at `path` in this process stopped compacting (it met a damaged table
/// file; reads and writes go on), if it did.
pub fn compaction_halted(path: &Path) -> Option<String> {
	let trees = TREES.lock().unwrap_or_else(|e| e.into_inner());
	let (_, handler) = trees.iter().find(|(p, _)| p == path)?;
	handler.upgrade()?.compaction_halted().map(|e| e.to_string())
}

/// A part of a table file that does not read back as written.
#[derive(Debug, Clone)]
pub struct DamagedBlock {
	/// The table file.
	pub file: PathBuf,
	/// What part: `data` (keys and values), `index` (where the data blocks are),
	/// `filter` (which keys the table may hold; reads go on without it) or `table` (the
	/// file cannot be opened at all).
	pub part: &'static str,
	/// Where the block starts in the file.
	pub offset: Option<u64>,
	/// The block's keys are all after this key...
	pub after: Option<Vec<u8>>,
	/// ...and up to this one (when known).
	pub through: Option<Vec<u8>>,
	/// What reading it said.
	pub error: String,
}

fn options(path: &Path) -> Arc<Options> {
	Arc::new(Options {
		path: path.to_path_buf(),
		..Options::default()
	})
}

/// The user key of an encoded internal key (the key without its 8-byte trailer).
fn user_key(encoded: &[u8]) -> Vec<u8> {
	encoded[..encoded.len().saturating_sub(8)].to_vec()
}

/// Reads every block of every table file the manifest of the database at `path` lists
/// (the database may be open meanwhile: a file merged away since is skipped) and returns
/// those that do not read back. Fails when the manifest itself cannot be read.
pub fn verify_tables(path: &Path) -> Result<Vec<DamagedBlock>> {
	let opts = options(path);
	let mut damaged = Vec::new();
	for id in LevelManifest::table_ids_on_disk(&opts)?.into_iter().flatten() {
		let file_path = opts.sstable_file_path(id);
		let file = match SysFile::open(&file_path) {
			Ok(file) => file,
			Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
			Err(e) => return Err(e.into()),
		};
		let file: Arc<dyn File> = Arc::new(file);
		let table = match file.size().and_then(|size| Table::new(id, Arc::clone(&opts), file, size)) {
			Ok(table) => table,
			Err(e) => {
				damaged.push(DamagedBlock {
					file: file_path,
					part: "table",
					offset: None,
					after: None,
					through: None,
					error: e.to_string(),
				});
				continue;
			}
		};
		verify_table(&table, &file_path, &mut damaged);
	}
	Ok(damaged)
}

fn verify_table(table: &Table, file_path: &Path, damaged: &mut Vec<DamagedBlock>) {
	let mut damage = |part, offset, after: &Option<Vec<u8>>, through: Option<Vec<u8>>, e: Error| {
		damaged.push(DamagedBlock {
			file: file_path.to_path_buf(),
			part,
			offset,
			after: after.clone(),
			through,
			error: e.to_string(),
		})
	};
	if let Some(why) = &table.filter_damage {
		damage("filter", None, &None, None, Error::Corruption(why.clone()));
	}
	let IndexType::Partitioned(index) = &table.index_block;
	let cmp = Arc::clone(&table.opts.internal_comparator);
	let mut after: Option<Vec<u8>> = None;
	for partition in &index.blocks {
		let through = Some(user_key(&partition.separator_key));
		let offset = Some(partition.handle.offset() as u64);
		let block = match crate::sstable::table::read_table_block(
			Arc::clone(&cmp),
			Arc::clone(&table.file),
			&partition.handle,
		) {
			Ok(block) => block,
			Err(e) => {
				damage("index", offset, &after, through.clone(), e);
				after = through;
				continue;
			}
		};
		let entries = (|| -> Result<Vec<(Vec<u8>, BlockHandle)>> {
			let mut entries = Vec::new();
			let mut iter = block.iter()?;
			iter.seek_to_first()?;
			while iter.is_valid() {
				let (handle, _) = BlockHandle::decode(iter.value_bytes())?;
				entries.push((iter.key_bytes().to_vec(), handle));
				iter.advance()?;
			}
			Ok(entries)
		})();
		let entries = match entries {
			Ok(entries) => entries,
			Err(e) => {
				damage("index", offset, &after, through.clone(), e);
				after = through;
				continue;
			}
		};
		for (separator, handle) in entries {
			let through = Some(user_key(&separator));
			if let Err(e) = check_block(Arc::clone(&table.file), &handle) {
				damage("data", Some(handle.offset() as u64), &after, through.clone(), e);
			}
			after = through;
		}
	}
}

/// What [`rebuild_manifest`] did.
#[derive(Debug, Clone)]
pub struct RebuiltManifest {
	/// Table files the new manifest lists.
	pub tables: usize,
	/// Table files that could not be opened, renamed to `<file>.damaged` (the engine
	/// would otherwise delete them as unlisted), with why.
	pub set_aside: Vec<(PathBuf, String)>,
	/// Where the old manifest was kept, if there was one.
	pub kept: Option<PathBuf>,
	/// The first log segment replayed at the next open (the older ones are in the tables).
	pub log_number: u64,
}

/// Writes a new manifest for the database at `path` (which must not be open) from its
/// table files: every table that opens is listed in level 0 (reads there take the newest
/// version of a key, and the first compaction sorts the levels again); the log segments
/// holding writes newer than every table are replayed at the next open. The old manifest
/// is kept beside it as `<manifest>.damaged-<seconds>`.
pub fn rebuild_manifest(path: &Path) -> Result<RebuiltManifest> {
	let opts = options(path);
	let mut lock = LockFile::new(path);
	lock.acquire()?;
	let mut ids = Vec::new();
	for entry in std::fs::read_dir(opts.sstable_dir())? {
		let name = entry?.file_name();
		let name = name.to_string_lossy();
		if let Some(id) = name.strip_suffix(".sst").filter(|n| n.len() == 20) {
			if let Ok(id) = id.parse::<u64>() {
				ids.push(id);
			}
		}
	}
	ids.sort_unstable();
	let mut level0 = Level::default();
	let mut set_aside = Vec::new();
	let mut last_sequence = 0;
	for &id in &ids {
		let file = opts.sstable_file_path(id);
		let opened = LevelManifest::load_table(id, Arc::clone(&opts)).and_then(|table| {
			match table.meta.largest_seq_num {
				Some(largest) => Ok((table, largest)),
				None => Err(Error::Corruption("the table holds no sequence numbers".into())),
			}
		});
		match opened {
			Ok((table, largest)) => {
				last_sequence = last_sequence.max(largest);
				level0.insert(table);
			}
			Err(e) => {
				let mut aside = file.clone().into_os_string();
				aside.push(".damaged");
				std::fs::rename(&file, &aside)?;
				set_aside.push((PathBuf::from(aside), e.to_string()));
			}
		}
	}
	let tables = level0.tables.len();
	let mut levels = vec![Arc::new(level0)];
	levels.extend((1..opts.level_count).map(|_| Arc::new(Level::default())));
	let log_number = first_unflushed_log(&opts.wal_dir(), last_sequence)?;

	std::fs::create_dir_all(opts.manifest_dir())?;
	let manifest_path = opts.manifest_file_path(0);
	let kept = if manifest_path.exists() {
		let seconds = std::time::SystemTime::now()
			.duration_since(std::time::UNIX_EPOCH)
			.map(|d| d.as_secs())
			.unwrap_or_default();
		let mut kept = manifest_path.clone().into_os_string();
		kept.push(format!(".damaged-{seconds}"));
		std::fs::rename(&manifest_path, &kept)?;
		Some(PathBuf::from(kept))
	} else {
		None
	};
	let manifest = LevelManifest {
		path: manifest_path,
		levels: Levels(levels),
		hidden_set: Default::default(),
		next_table_id: Arc::new(AtomicU64::new(ids.last().map_or(1, |last| last + 1))),
		manifest_format_version: MANIFEST_FORMAT_VERSION_V1,
		snapshots: Vec::new(),
		log_number,
		last_sequence,
	};
	write_manifest_to_disk(&manifest)?;
	lock.release()?;
	Ok(RebuiltManifest {
		tables,
		set_aside,
		kept,
		log_number,
	})
}

/// The first log segment holding a write newer than `last_sequence` (the newest in the
/// tables), or the one after the last when none does. A segment is one memtable's writes,
/// flushed whole or not at all.
fn first_unflushed_log(wal_dir: &Path, last_sequence: u64) -> Result<u64> {
	let Ok(segments) = list_segment_ids(wal_dir, Some("wal")) else {
		return Ok(0);
	};
	for &id in &segments {
		let file = SysFile::open(wal_dir.join(segment_name(id, "wal")))?;
		let mut reader = Reader::new(file);
		let newer = loop {
			match reader.read() {
				Ok((record, _)) => match Batch::decode(record) {
					Ok(batch) if batch.get_highest_seq_num() <= last_sequence => {}
					// Newer, or unreadable: the engine's own recovery decides.
					_ => break true,
				},
				Err(crate::wal::Error::IO(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
					break false
				}
				Err(_) => break true,
			}
		};
		if newer {
			return Ok(id);
		}
	}
	Ok(segments.last().map_or(0, |last| last + 1))
}
