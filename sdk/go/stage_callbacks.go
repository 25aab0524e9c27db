package ctrlhost

import "fmt"

// Stage is a point around a step a DependentChain or CrudResource takes on a child.
type Stage string

// The stages, in the order a step passes them.
const (
	PreCreate  Stage = "pre-create"
	PostCreate Stage = "post-create"
	PreUpdate  Stage = "pre-update"
	PostUpdate Stage = "post-update"
	PreDelete  Stage = "pre-delete"
	PostDelete Stage = "post-delete"
)

// Stages lists every stage.
var Stages = []Stage{PreCreate, PostCreate, PreUpdate, PostUpdate, PreDelete, PostDelete}

// StageCallback runs at one stage of a step on a child: desired is nil at the delete stages,
// current is nil for a create. A pre-create or pre-update callback may change desired; an error
// stops the step and the reconcile (retryable, or terminal when wrapped by Terminal).
type StageCallback func(req *Request, stage Stage, desired, current Object) error

type stageEntry struct {
	apiVersion, kind string
	stage            Stage
	name             string
	fn               StageCallback
}

// StageCallbacks is code that runs per child kind around the steps a DependentChain or
// CrudResource takes (as the C++, Python and Node SDKs' StageCallbacks):
//   - a step is a create (the child is absent), an update (it exists and the desired object has
//     a field with another value) or a delete (the chain leaves it out to be pruned); an
//     unchanged or skipped child takes no step;
//   - pre-create / pre-update run before the object is added to the answer and may change
//     desired in place; post-create / post-update see a copy of the answered object (the host
//     applies it after the reconcile returns); pre-delete / post-delete run with desired nil and
//     current the child being removed;
//   - several callbacks per kind and stage run in registration order; the first error stops the
//     step and the reconcile: "callback <name> at <stage>: <error>" (a Terminal error stays
//     terminal), prefixed by the chain with the dependent. A panic in a callback is that
//     callback's error.
//
// Register everything before use; once in use it is read-only and safe for concurrent use.
type StageCallbacks struct {
	entries []stageEntry
	err     error // a declaration error, answered by every Run
}

// On registers a callback for children of exactly this apiVersion and kind at stage; name is
// used in errors. An unknown stage is a declaration error that every later step answers as a
// terminal error (see Err).
func (s *StageCallbacks) On(apiVersion, kind string, stage Stage, name string, fn StageCallback) *StageCallbacks {
	if !validStage(stage) && s.err == nil {
		s.err = fmt.Errorf("callback %s: unknown stage %q (one of pre-create, post-create, "+
			"pre-update, post-update, pre-delete, post-delete)", name, string(stage))
	}
	if fn == nil && s.err == nil {
		s.err = fmt.Errorf("callback %s: no function", name)
	}
	s.entries = append(s.entries, stageEntry{apiVersion, kind, stage, name, fn})
	return s
}

// Err is the first declaration error of On, or nil.
func (s *StageCallbacks) Err() error {
	if s == nil {
		return nil
	}
	return s.err
}

func validStage(stage Stage) bool {
	for _, s := range Stages {
		if s == stage {
			return true
		}
	}
	return false
}

// Run runs the callbacks of that kind and stage in registration order and returns the first
// error. A nil *StageCallbacks runs nothing.
func (s *StageCallbacks) Run(req *Request, stage Stage, apiVersion, kind string, desired, current Object) error {
	if s == nil {
		return nil
	}
	if s.err != nil {
		return Terminal(s.err)
	}
	for _, e := range s.entries {
		if e.stage != stage || e.apiVersion != apiVersion || e.kind != kind {
			continue
		}
		if err := callStage(e, req, desired, current); err != nil {
			return fmt.Errorf("callback %s at %s: %w", e.name, string(stage), err)
		}
	}
	return nil
}

func callStage(e stageEntry, req *Request, desired, current Object) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panicked: %v", v)
		}
	}()
	return e.fn(req, e.stage, desired, current)
}

// RunStep runs the pre-stage of a create (create true) or an update, which may change desired,
// then the post-stage on a copy of desired.
func (s *StageCallbacks) RunStep(req *Request, create bool, apiVersion, kind string, desired, current Object) error {
	pre, post := PreUpdate, PostUpdate
	if create {
		pre, post = PreCreate, PostCreate
	}
	if err := s.Run(req, pre, apiVersion, kind, desired, current); err != nil {
		return err
	}
	decided, _ := DeepCopy(desired).(map[string]any)
	return s.Run(req, post, apiVersion, kind, decided, current)
}

// runDelete runs the pre-delete then the post-delete stage for a child being removed.
func (s *StageCallbacks) runDelete(req *Request, apiVersion, kind string, current Object) error {
	for _, stage := range []Stage{PreDelete, PostDelete} {
		if err := s.Run(req, stage, apiVersion, kind, nil, current); err != nil {
			return err
		}
	}
	return nil
}
