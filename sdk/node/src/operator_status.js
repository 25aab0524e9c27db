// @ts-check
'use strict';
// The standard operator status (as sdk/cpp's operator_status.h and sdk/python's
// operator_status.py): status.phase, operatorVersion, targetVersion, observedVersion,
// observedGeneration, and the conditions Available, Progressing, Degraded, Ready, Reconciling,
// Stalled that OpenShift, kstatus (Flux, Argo CD) and `kubectl wait --for=condition=Available`
// read. The host adds lastTransitionTime when a condition's status changes.
//
//   setOperatorStatus(req, result, { operatorVersion: '1.4.0', childrenReady: state.allReady,
//     message: 'waiting for web' });
//
// The phase, first match wins:
//   Deleting   the primary is being deleted
//   Error      `failure` is set (a persistent failure: Degraded and Stalled True)
//   Deployed   every child ready: observedVersion = targetVersion, Available True
//   Upgrading  not ready and the last observedVersion differs from the target: Progressing
//              True; Available stays True if it was (a normal upgrade is never Degraded)
//   Deploying  not ready otherwise: Progressing True, Available False

const { findPath } = require('./request');

function wasAvailable(req) {
  const conditions = findPath(req.object, 'status.conditions');
  if (!Array.isArray(conditions)) return false;
  const available = conditions.find((c) => c && typeof c === 'object' && c.type === 'Available');
  return available !== undefined && available.status === 'True';
}

/** { operatorVersion, targetVersion = operatorVersion, childrenReady = false, message = '',
 *    failure = '', failureReason = 'Failed' } */
function setOperatorStatus(req, result, input) {
  const {
    operatorVersion, targetVersion = '', childrenReady = false, message = '', failure = '',
    failureReason = 'Failed',
  } = input;
  const target = targetVersion || operatorVersion;
  const prev = findPath(req.object, 'status.observedVersion');
  const previous = typeof prev === 'string' ? prev : '';
  const status = result.status();
  status.operatorVersion = operatorVersion;
  status.targetVersion = target;
  status.observedGeneration = req.generation;
  const put = (type, value, reason, text) => result.setCondition(type, value, reason, text);
  const waiting = message || 'not every child is ready';
  if (req.deleting) {
    const gone = 'the object is being deleted';
    status.phase = 'Deleting';
    put('Available', false, 'Deleting', gone);
    put('Progressing', true, 'Deleting', gone);
    put('Degraded', false, 'AsExpected', '');
    put('Ready', false, 'Deleting', gone);
    put('Reconciling', true, 'Deleting', gone);
    put('Stalled', false, 'AsExpected', '');
  } else if (failure) {
    status.phase = 'Error';
    put('Available', childrenReady, childrenReady ? 'AsExpected' : 'NotReady',
      childrenReady ? '' : waiting);
    put('Progressing', false, failureReason, failure);
    put('Degraded', true, failureReason, failure);
    put('Ready', false, failureReason, failure);
    put('Reconciling', false, failureReason, failure);
    put('Stalled', true, failureReason, failure);
  } else if (childrenReady) {
    const text = `every child is ready at version ${target}`;
    status.phase = 'Deployed';
    status.observedVersion = target;
    put('Available', true, 'AsExpected', text);
    put('Progressing', false, 'AsExpected', text);
    put('Degraded', false, 'AsExpected', '');
    put('Ready', true, 'AsExpected', text);
    put('Reconciling', false, 'AsExpected', '');
    put('Stalled', false, 'AsExpected', '');
  } else if (previous && previous !== target) {
    const text = `upgrading from ${previous} to ${target}: ${waiting}`;
    const available = wasAvailable(req);
    status.phase = 'Upgrading';
    put('Available', available, available ? 'PreviousVersionAvailable' : 'Upgrading', text);
    put('Progressing', true, 'Upgrading', text);
    put('Degraded', false, 'AsExpected', '');
    put('Ready', false, 'Upgrading', text);
    put('Reconciling', true, 'Upgrading', text);
    put('Stalled', false, 'AsExpected', '');
  } else {
    status.phase = 'Deploying';
    put('Available', false, 'Deploying', waiting);
    put('Progressing', true, 'Deploying', waiting);
    put('Degraded', false, 'AsExpected', '');
    put('Ready', false, 'Deploying', waiting);
    put('Reconciling', true, 'Deploying', waiting);
    put('Stalled', false, 'AsExpected', '');
  }
}

module.exports = { setOperatorStatus };
