//! Making a session: its profile and driver checked, its worktree placed, its record
//! stored and its agent admitted; anything that fails before the agent runs is undone.

use super::*;

impl Lifecycle {
    /// Creates the worktree, stores the session and starts its agent. Anything that fails
    /// before the agent runs is undone and reported: no half-made session is left behind.
    /// Its agent gets the daemon's environment (see [`Lifecycle::create_for`]).
    pub async fn create(self: &Arc<Self>, params: CreateSessionParams) -> Result<Session> {
        self.create_from(params, None, None, None).await
    }

    /// [`Lifecycle::create`] for a process that gave its environment: its program is
    /// looked for on that `PATH` first, and its variables come from there first.
    pub async fn create_for(
        self: &Arc<Self>,
        params: CreateSessionParams,
        given: Option<ClientEnv>,
    ) -> Result<Session> {
        self.create_from(params, None, given.map(Arc::new), None)
            .await
    }

    /// The profile and driver a new session asks for, refused before anything is made
    /// when they cannot work together or with what the asking process gave.
    fn check_create(
        &self,
        params: &CreateSessionParams,
        given: Option<&ClientEnv>,
    ) -> Result<(AgentProfile, DriverSpec)> {
        let kiln = self.ledger.kiln();
        let config = self.settings()?;
        let profile = given::profile(&config, &params.agent, given).map_err(|source| {
            LifecycleError::Profile {
                source,
                settings: kiln.settings_path(),
            }
        })?;
        if params.in_place && params.worktree.is_some() {
            return Err(LifecycleError::WorktreeAndInPlace);
        }
        let spec = config.driver_spec(&profile, &params.driver)?;
        let kind = spec.kind();
        given::check_env(&spec, &params.driver, given)
            .and_then(|()| given::check_api_key(&params.agent, &profile, given))?;
        given::locate(&params.agent, profile.clone(), kind, given)?;
        if kind.runs_apart() {
            if profile.kind == AgentKind::Internal {
                return Err(LifecycleError::InternalApart { driver: kind });
            }
            if params.in_place {
                return Err(LifecycleError::InPlaceApart { driver: kind });
            }
        }
        Ok((profile, spec))
    }

    /// [`Lifecycle::create_for`], the new session's context stack a copy of `seed`'s (a
    /// fork), made before its agent starts; for a hand-off, taking over `from`'s worktree
    /// (and its ownership) and base branch, and naming it as where it came from.
    pub(super) async fn create_from(
        self: &Arc<Self>,
        params: CreateSessionParams,
        seed: Option<&str>,
        given: Option<Arc<ClientEnv>>,
        from: Option<&Session>,
    ) -> Result<Session> {
        let mut params = params;
        if let Some(task) = params.task.take() {
            params.task = Some(control::bounded_task(task, from.is_some())?);
        }
        let kiln = self.ledger.kiln().clone();
        let (profile, spec) = self.check_create(&params, given.as_deref())?;
        let id = self.ledger.next_id();
        let placement = {
            let _git = self.git.lock().await;
            self.place(&id, &params).await?
        };
        let now = now_rfc3339();
        let worktree = placement.path.as_ref().map(|p| p.display().to_string());
        let display = display_name(&kiln, worktree.as_deref(), &params.agent);
        let session = Session {
            state: Some(SessionState::Creating),
            task: params.task.clone().filter(|t| !t.trim().is_empty()),
            branch: placement.branch.clone(),
            worktree_owned: placement.created.is_some() || from.is_some_and(|f| f.worktree_owned),
            handed_from: from.map(|f| f.id.clone()),
            updated_at: Some(now.clone()),
            driver: Some(spec),
            security: crate::protocol::SecurityState {
                read_manifest: (!params.allow_read.is_empty()).then(|| params.allow_read.clone()),
                ..Default::default()
            },
            base_branch: from
                .and_then(|f| f.base_branch.clone())
                .or_else(|| placement.base_branch.clone()),
            channel: params.channel.clone(),
            ..Session::started(
                id.clone(),
                worktree,
                profile.kind.as_str().into(),
                params.agent.clone(),
                display,
                now,
            )
        };
        let session = match self.ledger.add_managed(session).await {
            Ok(s) => s,
            Err(e) => {
                let _git = self.git.lock().await;
                placement.undo(kiln.root()).await;
                return Err(e.into());
            }
        };
        let seeded = match seed {
            Some(from) => self.ledger.copy_context(from, &id).await,
            None => Ok(()),
        };
        if let Err(e) = seeded {
            let _git = self.git.lock().await;
            placement.undo(kiln.root()).await;
            let _ = self.ledger.remove_managed(&id, &Default::default()).await;
            return Err(e.into());
        }
        self.runner.keep_given(&id, given);
        // The task goes in with the actor, so the agent starts on it as soon as it is
        // ready (never showing `complete` first).
        let task = session.task.clone();
        if let Err(why) = self
            .runner
            .admit(session, &params.agent, profile, None, task)
            .await
        {
            self.runner.keep_given(&id, None);
            let _git = self.git.lock().await;
            placement.undo(kiln.root()).await;
            let _ = self.ledger.remove_managed(&id, &Default::default()).await;
            let _ = std::fs::remove_file(MarkdownLog::path_for(&kiln.sessions_dir(), &id));
            return Err(RunError::Spawn(why).into());
        }
        Ok(self.ledger.get_session(&id)?)
    }
}
