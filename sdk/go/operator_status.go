package ctrlhost

// OperatorStatus is the input of SetOperatorStatus.
type OperatorStatus struct {
	OperatorVersion string // the plugin's own version
	TargetVersion   string // the version the children should run ("": OperatorVersion)
	ChildrenReady   bool
	Message         string // why not ready (Progressing / Available messages)
	Failure         string // non-empty: a persistent failure (phase Error, Degraded)
	FailureReason   string // CamelCase ("": "Failed")
}

// SetOperatorStatus writes the standard operator status (as the C++, Python and Node SDKs):
// status.phase, operatorVersion, targetVersion, observedVersion (only once every child is ready
// at the target), observedGeneration, and the conditions Available, Progressing, Degraded,
// Ready, Reconciling and Stalled that OpenShift, kstatus (Flux, Argo CD) and
// `kubectl wait --for=condition=Available` read. The host adds lastTransitionTime when a
// condition's status changes. The phase, first match wins:
//
//	Deleting   the primary is being deleted
//	Error      Failure is set (a persistent failure: Degraded and Stalled True)
//	Deployed   every child ready: observedVersion = targetVersion, Available True
//	Upgrading  not ready and the last observedVersion differs from the target: Progressing
//	           True; Available stays True if it was (a normal upgrade is never Degraded)
//	Deploying  not ready otherwise: Progressing True, Available False
//
// A pure function of its arguments.
func SetOperatorStatus(req *Request, res *Result, in OperatorStatus) {
	target := in.TargetVersion
	if target == "" {
		target = in.OperatorVersion
	}
	failureReason := in.FailureReason
	if failureReason == "" {
		failureReason = "Failed"
	}
	previous, _ := String(req.Object, "status.observedVersion")
	status := map[string]any{
		"operatorVersion":    in.OperatorVersion,
		"targetVersion":      target,
		"observedGeneration": req.Generation(),
	}
	put := func(typ string, value bool, reason, message string) {
		s := ConditionFalse
		if value {
			s = ConditionTrue
		}
		res.SetCondition(typ, s, reason, message)
	}
	waiting := in.Message
	if waiting == "" {
		waiting = "not every child is ready"
	}
	switch {
	case req.Deleting():
		gone := "the object is being deleted"
		status["phase"] = "Deleting"
		put("Available", false, "Deleting", gone)
		put("Progressing", true, "Deleting", gone)
		put("Degraded", false, "AsExpected", "")
		put("Ready", false, "Deleting", gone)
		put("Reconciling", true, "Deleting", gone)
		put("Stalled", false, "AsExpected", "")
	case in.Failure != "":
		status["phase"] = "Error"
		reason, text := "NotReady", waiting
		if in.ChildrenReady {
			reason, text = "AsExpected", ""
		}
		put("Available", in.ChildrenReady, reason, text)
		put("Progressing", false, failureReason, in.Failure)
		put("Degraded", true, failureReason, in.Failure)
		put("Ready", false, failureReason, in.Failure)
		put("Reconciling", false, failureReason, in.Failure)
		put("Stalled", true, failureReason, in.Failure)
	case in.ChildrenReady:
		text := "every child is ready at version " + target
		status["phase"] = "Deployed"
		status["observedVersion"] = target
		put("Available", true, "AsExpected", text)
		put("Progressing", false, "AsExpected", text)
		put("Degraded", false, "AsExpected", "")
		put("Ready", true, "AsExpected", text)
		put("Reconciling", false, "AsExpected", "")
		put("Stalled", false, "AsExpected", "")
	case previous != "" && previous != target:
		text := "upgrading from " + previous + " to " + target + ": " + waiting
		available := wasAvailable(req)
		reason := "Upgrading"
		if available {
			reason = "PreviousVersionAvailable"
		}
		status["phase"] = "Upgrading"
		put("Available", available, reason, text)
		put("Progressing", true, "Upgrading", text)
		put("Degraded", false, "AsExpected", "")
		put("Ready", false, "Upgrading", text)
		put("Reconciling", true, "Upgrading", text)
		put("Stalled", false, "AsExpected", "")
	default:
		status["phase"] = "Deploying"
		put("Available", false, "Deploying", waiting)
		put("Progressing", true, "Deploying", waiting)
		put("Degraded", false, "AsExpected", "")
		put("Ready", false, "Deploying", waiting)
		put("Reconciling", true, "Deploying", waiting)
		put("Stalled", false, "AsExpected", "")
	}
	res.MergeStatus(status)
}

func wasAvailable(req *Request) bool {
	conditions, _ := Lookup(req.Object, "status.conditions").([]any)
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Available" {
			return m["status"] == "True"
		}
	}
	return false
}
